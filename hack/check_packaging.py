"""The packaging check: the suite as an implementer installs it, run where they run it.

    python hack/check_packaging.py [--keep]     (`tox -e packaging`; `.ci/run` runs it)

1. builds the sdist and, from the sdist, the wheel (`python -m build`, which must be installed);
2. checks that both carry every file the suite reads (`conformance.data.shipped`) and that the
   wheel holds no package but the suite's and the reference implementation's;
3. installs the wheel alone into a fresh virtual environment outside the checkout;
4. from an empty directory outside the checkout, with the installed package only:
   - `inferencepool-conformance --version` and `--help` (the option groups);
   - the whole suite on the embedded default, the pytest way, as the README runs it
     (`pytest --pyargs conformance.tests -n 2`);
   - `inferencepool-conformance cluster up`, the reference implementation and its GatewayClass
     on that cluster, and the whole suite against it with `--kubeconfig` (the console script);
   each run must pass, collect exactly the checkout's conformance tests, and leave its results
   where it says; the embedded control plane must be the checkout's cached binary (same sources,
   same cache key: nothing is rebuilt).

Everything happens in a temporary directory, removed afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))

from conformance import data  # noqa: E402  (pure: imports nothing but pathlib)

PACKAGES = {"conformance", "reference_gateway"}  # the wheel's top-level packages, and no other
REFERENCE_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"


class Failed(Exception):
    pass


def step(msg: str) -> None:
    print(f"packaging: {msg}", flush=True)


def clean_env() -> dict[str, str]:
    """This environment without what would point the installed suite back at the checkout or an outer run."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KUBECONFIG", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
            "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "TOX_ENV_DIR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(argv: list, cwd: Path, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=clean_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise Failed(f"{' '.join(map(str, argv))} exited {done.returncode} after {time.monotonic() - started:.0f}s:\n"
                     + (done.stdout + done.stderr)[-6000:])
    return done


def build(dist: Path) -> tuple[Path, Path]:
    started = time.monotonic()
    run([sys.executable, "-m", "build", "--outdir", dist, CHECKOUT], cwd=CHECKOUT)
    sdist, wheel = next(dist.glob("*.tar.gz")), next(dist.glob("*.whl"))
    step(f"built {sdist.name} and, from it, {wheel.name} in {time.monotonic() - started:.0f}s")
    return sdist, wheel


def check_contents(sdist: Path, wheel: Path) -> None:
    shipped = [p.as_posix() for p in data.shipped(CHECKOUT)]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    missing = [p for p in shipped if f"conformance/_data/{p}" not in names]
    if missing:
        raise Failed(f"the wheel lacks {len(missing)} data file(s): {', '.join(missing[:10])}")
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    if top != PACKAGES:
        raise Failed(f"the wheel's top level is {sorted(top)}, not {sorted(PACKAGES)} (the project's tests/ "
                     "must not be installed)")
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    missing = [p for p in [*shipped, "setup.py", "MANIFEST.in", "conformance/data.py"] if p not in members]
    if missing:
        raise Failed(f"the sdist lacks {', '.join(missing[:10])}")
    step(f"the sdist and the wheel carry all {len(shipped)} data files (manifests/, controlplane/ sources)")


def install(wheel: Path, venv: Path) -> Path:
    started = time.monotonic()
    run([sys.executable, "-m", "venv", venv], cwd=venv.parent)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel], cwd=venv.parent)
    step(f"installed the wheel into a fresh virtual environment in {time.monotonic() - started:.0f}s")
    return python


def checkout_tests(python: Path) -> set[str]:
    """The checkout's conformance tests (collected by the fresh environment's pytest: `-m` from the
    checkout imports the checkout's package)."""
    done = run([python, "-m", "conformance", "tests", "--json"], cwd=CHECKOUT)
    return {t["key"] for t in json.loads(done.stdout)}


def installed_facts(python: Path, cwd: Path) -> dict:
    code = ("import json, conformance; from conformance import data; from conformance.cluster import binary; "
            "print(json.dumps({'version': conformance.version(), 'installed': data.installed(), "
            "'package': str(data.PACKAGE), 'kcp': str(binary.cached_path())}))")
    return json.loads(run([python, "-c", code], cwd=cwd).stdout)


def check_run(done: subprocess.CompletedProcess, results: Path, expected: set[str], what: str,
              verdict: str = "success") -> None:
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise Failed(f"{what}: exit {done.returncode}:\n{out[-6000:]}")
    # One line per judged API: `Gateway (v1 v1.6) core: success (...)`.
    verdicts = re.findall(r"^Gateway(?: \([^)]*\))? core: (\w+)", out, re.MULTILINE)
    if not verdicts or set(verdicts) != {verdict} or f"Results: {results}" not in out:
        raise Failed(f"{what}: the run did not report {verdict} and its results directory:\n{out[-4000:]}")
    junit = results / "junit.xml"
    keys = set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        keys.add(f"{module}.py::{case.get('name')}")
    if keys != expected:
        raise Failed(f"{what}: ran {len(keys)} tests, not the checkout's {len(expected)}; extra: "
                     f"{sorted(keys - expected)[:5]}, missing: {sorted(expected - keys)[:5]}")
    if not (results / "report.html").is_file():
        raise Failed(f"{what}: no report.html in {results}")
    summary = next((ln for ln in reversed(out.splitlines()) if " passed" in ln), "").strip("= ")
    step(f"{what}: {summary}; results in {results}")


def cluster_run(venv: Path, workdir: Path, rundir: Path, expected: set[str]) -> None:
    """The whole suite with --kubeconfig against a cluster that is already running, its implementation
    started apart, as an implementer runs it."""
    python, script = venv / "bin" / "python", venv / "bin" / "inferencepool-conformance"
    logs = workdir / "logs"
    logs.mkdir()
    up = subprocess.Popen([script, "cluster", "up"], cwd=rundir, env=clean_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=open(logs / "cluster.log", "w"), text=True)
    gateway = None
    try:
        kubeconfig = up.stdout.readline().strip()
        if not kubeconfig:
            raise Failed("cluster up printed no kubeconfig:\n" + (logs / "cluster.log").read_text()[-3000:])
        step(f"cluster up: {kubeconfig}")
        run([python, "-c", "import sys; from kubernetes import config; from conformance.kube import Kube; "
             "Kube(config.new_client_from_config(config_file=sys.argv[1])).create({"
             "'apiVersion': 'gateway.networking.k8s.io/v1', 'kind': 'GatewayClass', "
             "'metadata': {'name': 'reference'}, 'spec': {'controllerName': sys.argv[2]}})",
             kubeconfig, REFERENCE_CONTROLLER], cwd=rundir)
        gateway = subprocess.Popen([python, "-m", "reference_gateway", f"--kubeconfig={kubeconfig}",
                                    f"--controller-name={REFERENCE_CONTROLLER}", "--api-revision=seed"],
                                   cwd=rundir, env=clean_env(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=open(logs / "gateway.log", "w"))
        results = workdir / "results-kubeconfig"
        started = time.monotonic()
        # This cluster has no kubelet: its Pods never run, so the traffic tier is left out.
        done = run([script, f"--kubeconfig={kubeconfig}", "--gateway-class=reference", f"--results-dir={results}",
                    "--skip-traffic"], cwd=rundir, check=False)
        # Partial: a run that leaves a tier out is no full success.
        check_run(done, results, expected, f"console script with --kubeconfig ({time.monotonic() - started:.0f}s)",
                  verdict="partial")
    finally:
        for proc in (gateway, up):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="ipc-packaging-"))
    if workdir.resolve().is_relative_to(CHECKOUT):
        raise SystemExit(f"the temporary directory {workdir} lies in the checkout; set TMPDIR elsewhere")
    try:
        sdist, wheel = build(workdir / "dist")
        check_contents(sdist, wheel)
        venv = workdir / "venv"
        python = install(wheel, venv)
        rundir = workdir / "run"  # empty, and outside the checkout
        rundir.mkdir()
        expected = checkout_tests(python)

        facts = installed_facts(python, rundir)
        if not facts["installed"] or not Path(facts["package"]).is_relative_to(venv):
            raise Failed(f"the installed suite does not read its own files: {facts}")
        from conformance.cluster import binary

        if facts["kcp"] != str(binary.cached_path()):
            raise Failed(f"the installed package's control-plane cache key differs from the checkout's: "
                         f"{facts['kcp']} != {binary.cached_path()} (its sources differ)")
        step(f"installed {facts['version']} reads its files from {facts['package']}; control plane: "
             f"{facts['kcp']} ({'cached' if Path(facts['kcp']).exists() else 'to be built'}, same key as the checkout)")

        script = venv / "bin" / "inferencepool-conformance"
        version = run([script, "--version"], cwd=rundir).stdout
        helptext = run([script, "--help"], cwd=rundir).stdout
        if facts["version"] not in version or "API revisions" not in version:
            raise Failed(f"--version says: {version}")
        groups = [ln for ln in helptext.splitlines() if ln.startswith("InferencePool conformance: ")]
        if len(groups) < 4:
            raise Failed(f"--help shows the option groups {groups}:\n{helptext}")
        step(f"--version: {version.splitlines()[0]}; --help: {len(groups)} option groups")

        results = workdir / "results-embedded"
        t0 = time.monotonic()
        # As the README runs it: two pytest-xdist workers (a dependency of the package) on one cluster.
        done = run([venv / "bin" / "pytest", "--pyargs", "conformance.tests", "-n", "2", f"--results-dir={results}"],
                   cwd=rundir, check=False)
        check_run(done, results, expected,
                  f"pytest --pyargs conformance.tests -n 2, embedded ({time.monotonic() - t0:.0f}s)")

        cluster_run(venv, workdir, rundir, expected)
        left = sorted(p.name for p in rundir.iterdir())
        if ".pytest_cache" in left:
            raise Failed(f"the runs left a .pytest_cache in {rundir}")
        step(f"passed in {time.monotonic() - started:.0f}s")
        return 0
    except Failed as e:
        print(f"packaging: FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        if args.keep:
            step(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
