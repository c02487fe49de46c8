"""The same status work with our suite and with chainsaw (kyverno/chainsaw), on one cluster, in one run.

    python bench/peer_chainsaw.py [--runs 3]

Four of our status tests (SCENARIOS) are rewritten, at run time, as chainsaw
tests that apply the same objects, make the same changes and assert the same
InferencePool status.parent conditions, each in a namespace of its own. One
embedded cluster with the reference implementation serves both tools; each
tool runs as a whole process, timed by the wall clock, taking turns with the
other, `--runs` times sequentially and then `--runs` times two at a time
(pytest `-n 2`, chainsaw `--parallel 2`). Both must pass every time. The
sequential turns also time chainsaw with all tests in one shared namespace
(`--namespace`): less isolation than ours, shown for what it costs.
`--check-failing` first makes each chainsaw assert in turn expect a wrong value
and checks that the test then fails, at that assert.

Settings: chainsaw's defaults (assert timeout 30 s, polling every 50 ms,
cleanup deletes every object and the test's namespace and waits until they are
gone); our suite's defaults (it deletes and waits for each test's objects, and
waits for all its namespaces once, at the end of the run).

chainsaw v0.2.12 does not build with Go 1.25 or later as released (its copy of
testing's internal interface lacks ModulePath), so it is built here once with a
one-line shim and cached under $XDG_CACHE_HOME/inferencepool-conformance/tools/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import report, summary  # noqa: E402
from kubernetes import config  # noqa: E402

from conformance.cluster.binary import cache_dir  # noqa: E402
from conformance.cluster.embedded import EmbeddedCluster  # noqa: E402
from conformance.features import REFERENCE_GATEWAY_CLASS  # noqa: E402
from conformance.kube import Kube  # noqa: E402
from conformance.revisions import DEFAULT, GATEWAY_GROUP, REVISIONS  # noqa: E402
from conformance.topology import load  # noqa: E402
from tests.suite_run import PYTEST, clean_env, reference_gateway_class, start_reference, stop  # noqa: E402

CHAINSAW_MODULE = "github.com/kyverno/chainsaw"
CHAINSAW_VERSION = "v0.2.12"
POOL_API = "inference.networking.x-k8s.io/v1alpha2"
GATEWAY_API = f"{GATEWAY_GROUP}/v1"
RUN_TIMEOUT = 600
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}

# -- chainsaw, built once ----------------------------------------------------------

SHIM = '''package internal

// ModulePath is the testing.testDeps method Go 1.25 added.
func (*TestDeps) ModulePath() string { return "" }
'''


def chainsaw_path() -> Path:
    return cache_dir() / "tools" / f"chainsaw-{CHAINSAW_VERSION}"


def _works(binary: Path) -> bool:
    try:
        return subprocess.run([str(binary), "version"], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def _fail(line: str) -> None:
    print(line, file=sys.stderr)
    sys.exit(1)


def chainsaw_binary() -> Path:
    """The cached chainsaw binary, built first when it is not there (once)."""
    target = chainsaw_path()
    if target.exists() and _works(target):
        return target
    go = shutil.which("go")
    if go is None:
        _fail(f"cannot build chainsaw {CHAINSAW_VERSION}: `go` is not on PATH (install Go, or put a chainsaw "
              f"{CHAINSAW_VERSION} binary at {target})")
    print(f"building chainsaw {CHAINSAW_VERSION} into {target} (once; about 10 minutes on 2 cores) ...",
          file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chainsaw-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text(
            f"module chainsawbuild\n\ngo 1.24\n\nrequire {CHAINSAW_MODULE} {CHAINSAW_VERSION}\n")
        (work / "tools.go").write_text(f'//go:build tools\n\npackage tools\n\nimport _ "{CHAINSAW_MODULE}"\n')
        env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""}
        partial = target.with_name(target.name + f".partial-{os.getpid()}")
        shim = (work / "vendor" / "github.com" / "kyverno" / "chainsaw" / "pkg" / "runner" / "internal"
                / "zz_modulepath.go")
        for what, argv, extra in [
            ("go mod tidy", [go, "mod", "tidy"], {"GOFLAGS": "-mod=mod"}),
            ("go mod vendor", [go, "mod", "vendor"], {}),
            ("go build", [go, "build", "-mod=vendor", "-o", str(partial), CHAINSAW_MODULE], {}),
        ]:
            if what == "go build":
                if not shim.parent.is_dir():
                    _fail(f"chainsaw build failed: {shim.parent} is missing after `go mod vendor`")
                shim.write_text(SHIM)
            done = subprocess.run(argv, cwd=work, env={**env, **extra}, capture_output=True, text=True)
            if done.returncode != 0:
                partial.unlink(missing_ok=True)
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
                _fail(f"chainsaw build failed at `{what}` (exit {done.returncode}): {last[0]}")
        partial.replace(target)
    if not _works(target):
        _fail(f"chainsaw build failed: {target} was built but `chainsaw version` does not run")
    return target


# -- the chainsaw tests, generated from our manifests -------------------------------


def _gateway_entry(gateway: str) -> str:
    """JMESPath: the pool's status.parent entries naming Gateway <test namespace>/gateway, as the
    revision in use spells the parentRef (conformance.revisions.Revision.names_gateway)."""
    revision = REVISIONS[DEFAULT]
    common = f"parentRef.kind=='Gateway' && parentRef.name=='{gateway}'"
    if revision.parent_ref_shape == "ObjectReference":
        # `|| ''`: starts_with on a missing apiVersion is an error, which fails a chainsaw assert at once.
        return (f"status.parent[?{common} && parentRef.namespace==$namespace"
                f" && starts_with(parentRef.apiVersion || '', '{GATEWAY_GROUP}/')]")
    return (f"status.parent[?{common} && parentRef.group=='{GATEWAY_GROUP}'"
            f" && (parentRef.namespace == null || parentRef.namespace==$namespace)]")


def _pool_assert(gateway: str, ctype: str, status: str, reason: str, pool: str = "pool") -> dict:
    """Like Topology.wait_pool_condition: the entry for the Gateway has the latest condition ctype=status, reason.

    "Latest" (rule C4): observedGeneration absent or equal to metadata.generation, read off the same
    object through the binding `$pool` (a literal number would never equal it: JMESPath literals are
    floats, the object's numbers integers).
    """
    return {"assert": {"resource": {
        "apiVersion": POOL_API, "kind": "InferencePool", "metadata": {"name": pool},
        "(@)->pool": {
            f"({_gateway_entry(gateway)} | [0].conditions[?type=='{ctype}'] | [0])": {
                "status": status, "reason": reason,
                "(observedGeneration == null || observedGeneration == $pool.metadata.generation)": True}}}}}


def _no_parent_assert(gateway: str) -> dict:
    """Like Topology.wait_no_pool_parent: the pool exists and has no entry for the Gateway."""
    return {"assert": {"resource": {
        "apiVersion": POOL_API, "kind": "InferencePool", "metadata": {"name": "pool"},
        f"(length({_gateway_entry(gateway)} || `[]`))": 0}}}


def _docs() -> list[dict]:
    """manifests/status/pool-with-route.yaml for the reference GatewayClass, namespace left to chainsaw."""
    docs = load("pool-with-route.yaml", namespace="", gateway_class=REFERENCE_GATEWAY_CLASS, api=REVISIONS[DEFAULT].api)
    for d in docs:
        del d["metadata"]["namespace"]
    return docs


def _apply(*skip: str) -> list[dict]:
    return [{"apply": {"resource": d}} for d in _docs() if f"{d['kind']}/{d['metadata']['name']}" not in skip]


def _service(name: str = "picker") -> dict:
    service = next(d for d in _docs() if d["kind"] == "Service")
    service["metadata"]["name"] = name
    return service


def _other_pool(name: str, picker: str) -> dict:
    """The file's pool under another name, its endpoint picker reference naming Service `picker`."""
    pool = next(d for d in _docs() if d["kind"] == "InferencePool")
    pool["metadata"]["name"] = name
    ref = pool["spec"].get("extensionRef") or pool["spec"]["endpointPickerRef"]
    ref["name"] = picker
    return pool


def _gateway(name: str) -> dict:
    return {"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": {"name": name},
            "spec": {"gatewayClassName": REFERENCE_GATEWAY_CLASS,
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}


def _route(name: str, gateway: str, pool: str = "pool") -> dict:
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": {"name": name},
            "spec": {"parentRefs": [{"name": gateway}],
                     "rules": [{"backendRefs": [{"group": "inference.networking.x-k8s.io",
                                                 "kind": "InferencePool", "name": pool}]}]}}


def _delete(api_version: str, kind: str, name: str) -> dict:
    return {"delete": {"ref": {"apiVersion": api_version, "kind": kind, "name": name}}}


def _steps_pool_accepted() -> list[dict]:
    return [{"name": "accepted", "try": [*_apply(),
                                         _pool_assert("gateway", "Accepted", "True", "Accepted"),
                                         _pool_assert("gateway", "ResolvedRefs", "True", "ResolvedRefs")]}]


def _steps_missing_service() -> list[dict]:
    return [{"name": "missing-service",
             "try": [*_apply("Service/picker"),
                     _pool_assert("gateway", "ResolvedRefs", "False", "InvalidExtensionRef")]}]


def _steps_transitions() -> list[dict]:
    # As test_extension_ref_transitions: pool `pool` with its Service, pool `other` without; each step
    # deletes the one Service and creates the other.
    services = {"pool": "picker", "other": "other-picker"}
    resolved, unresolved = ("True", "ResolvedRefs"), ("False", "InvalidExtensionRef")
    state = {"pool": resolved, "other": unresolved}
    steps = [{"name": "out-of-step", "try": [
        *_apply(), {"apply": {"resource": _other_pool("other", services["other"])}},
        {"apply": {"resource": _route("other-route", "gateway", "other")}},
        *(_pool_assert("gateway", "ResolvedRefs", *state[p], pool=p) for p in state)]}]
    for i in (1, 2):
        changes = [_delete("v1", "Service", services[p]) if state[p] == resolved
                   else {"apply": {"resource": _service(services[p])}} for p in state]
        state = {p: unresolved if was == resolved else resolved for p, was in state.items()}
        steps.append({"name": f"transition-{i}", "try": [
            *changes, *(_pool_assert("gateway", "ResolvedRefs", *state[p], pool=p) for p in state)]})
    return steps


def _steps_route_removed() -> list[dict]:
    return [
        {"name": "second-gateway", "try": [*_apply(), {"apply": {"resource": _gateway("gateway-2")}},
                                           {"apply": {"resource": _route("route-2", "gateway-2")}},
                                           _pool_assert("gateway-2", "Accepted", "True", "Accepted")]},
        {"name": "route-removed", "try": [_delete(GATEWAY_API, "HTTPRoute", "route-2"),
                                          _no_parent_assert("gateway-2"),
                                          _pool_assert("gateway", "Accepted", "True", "Accepted")]},
    ]


# name -> (our test file under conformance/tests/, chainsaw steps, what the chainsaw test leaves out)
SCENARIOS: dict[str, tuple[str, Callable[[], list[dict]], str]] = {
    "pool-accepted": ("test_pool_accepted.py", _steps_pool_accepted, "same checks"),
    "extension-ref-missing-service": ("test_extension_ref_missing_service.py", _steps_missing_service,
                                      "same checks"),
    "extension-ref-transitions": ("test_extension_ref_transitions.py", _steps_transitions,
                                  "no lastTransitionTime checks, so none of our waits for the next second"),
    "route-removed": ("test_route_removed.py", _steps_route_removed, "same checks"),
}


def _write_test(root: Path, name: str, steps: list[dict]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "chainsaw-test.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "chainsaw.kyverno.io/v1alpha1", "kind": "Test", "metadata": {"name": name},
         "spec": {"steps": steps}}, sort_keys=False, width=1000))


def write_chainsaw_tests(root: Path) -> None:
    """One directory per scenario with its chainsaw-test.yaml."""
    for name, (_, steps_of, _) in SCENARIOS.items():
        _write_test(root, name, steps_of())


def write_broken_tests(root: Path) -> dict[str, tuple[str, int]]:
    """Each scenario once per assert, with that one assert expecting a wrong value (a wrong reason,
    or one entry where there must be none).
    {test name: (the step of the wrong assert, its place among that step's asserts)}."""
    broken = {}
    for name, (_, steps_of, _) in SCENARIOS.items():
        count = sum("assert" in op for step in steps_of() for op in step["try"])
        for k in range(count):
            steps = steps_of()
            asserts = [(step, i, op) for step in steps
                       for i, op in enumerate(op for op in step["try"] if "assert" in op)]
            step, place, op = asserts[k]
            resource = op["assert"]["resource"]
            if "(@)->pool" in resource:
                next(iter(resource["(@)->pool"].values()))["reason"] = "DeliberatelyWrong"
            else:
                resource[next(key for key in resource if key.startswith("(length("))] = 1
            test = f"{name}-wrong-{k + 1}"
            _write_test(root, test, steps)
            broken[test] = (step["name"], place)
    return broken


# -- running each tool ----------------------------------------------------------------


def _iso(ts: str) -> float:
    """An RFC 3339 time with up to nanoseconds (Go's) as epoch seconds."""
    ts = re.sub(r"(\.\d{6})\d+", r"\1", ts).replace("Z", "+00:00")
    return datetime.fromisoformat(ts).timestamp()


def _timed(argv: list[str], cwd: Path, env: dict, label: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    took = time.monotonic() - started
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(f"{label} failed (exit {done.returncode}); the end of its output:\n{output[-4000:]}", file=sys.stderr)
        sys.exit(1)
    return took, output


def run_ours(kubeconfig: Path, parallel: int, work: Path) -> tuple[float, dict[str, float]]:
    results = Path(tempfile.mkdtemp(prefix="ours-", dir=work))
    argv = [*PYTEST, f"--kubeconfig={kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS,
            *(["-n", str(parallel)] if parallel > 1 else ["-p", "no:xdist"]),
            *[f"conformance/tests/{test_file}" for test_file, _, _ in SCENARIOS.values()],
            f"--results-dir={results}"]
    took, _ = _timed(argv, REPO, clean_env(), f"our suite (parallel {parallel})")
    per = {}
    by_module = {Path(f).stem: name for name, (f, _, _) in SCENARIOS.items()}
    for case in ET.parse(results / "junit.xml").getroot().iter("testcase"):
        name = by_module.get(case.get("classname", "").rsplit(".", 1)[-1])
        if name:
            per[name] = per.get(name, 0.0) + float(case.get("time", 0))
    return took, per


def run_chainsaw(binary: Path, kubeconfig: Path, tests: Path, parallel: int, work: Path,
                 namespace: str | None = None) -> tuple[float, dict[str, float], dict[str, float]]:
    """`namespace`: all tests in that one namespace (chainsaw's --namespace) instead of one each."""
    out = Path(tempfile.mkdtemp(prefix="chainsaw-", dir=work))
    # chainsaw v0.2.12 has no flag for the kubeconfig file (only --kube-context and the like):
    # it reads KUBECONFIG.
    env = {**clean_env(), "KUBECONFIG": str(kubeconfig)}
    argv = [str(binary), "test", "--test-dir", str(tests), "--parallel", str(parallel), "--no-color",
            "--report-format", "JSON", "--report-path", str(out), "--report-name", "report",
            *(["--namespace", namespace] if namespace else [])]
    took, _ = _timed(argv, out, env, f"chainsaw (parallel {parallel})")
    data = json.loads((out / "report.json").read_text())
    per, cleanup = {}, {}
    for test in data.get("tests", []):
        per[test["name"]] = _iso(test["endTime"]) - _iso(test["startTime"])
        cleanup[test["name"]] = sum(_iso(s["endTime"]) - _iso(s["startTime"]) for s in test.get("steps", [])
                                    if s.get("name", "").startswith("cleanup"))
    return took, per, cleanup


def wait_clean(kube: Kube, timeout: float = 120) -> None:
    """Between runs (untimed): only the cluster's own namespaces are left."""
    deadline = time.monotonic() + timeout
    while True:
        left = [ns["metadata"]["name"] for ns in kube.list("v1", "Namespace", None)["items"]
                if ns["metadata"]["name"] not in SYSTEM_NAMESPACES]
        if not left:
            return
        if time.monotonic() > deadline:
            _fail(f"namespaces still there {timeout:.0f}s after a run: {', '.join(left)}")
        time.sleep(0.2)


def check_chainsaw_can_fail(binary: Path, kubeconfig: Path, work: Path) -> dict[str, bool]:
    """Every assert of the generated chainsaw tests, made to expect a wrong value, must fail its test, at that
    assert. Run with a 5 s assert timeout, two at a time. {test name: it failed where it should}."""
    tests, out = work / "broken-tests", work / "broken-report"
    out.mkdir()
    broken = write_broken_tests(tests)
    done = subprocess.run([str(binary), "test", "--test-dir", str(tests), "--parallel", "2", "--no-color",
                           "--assert-timeout", "5s", "--report-format", "JSON", "--report-path", str(out),
                           "--report-name", "report"],
                          cwd=out, env={**clean_env(), "KUBECONFIG": str(kubeconfig)}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if done.returncode == 0:
        _fail("chainsaw passed tests that expect wrong values: the generated tests do not check what they claim")
    failed_at = {}
    for test in json.loads((out / "report.json").read_text()).get("tests", []):
        for step in test.get("steps", []):
            asserts = [op for op in step.get("operations", []) if op.get("type") == "assert"]
            failing = [i for i, op in enumerate(asserts) if op.get("failure")]
            if failing:
                failed_at[test["name"]] = (step.get("name"), failing[0])
                break
    return {test: failed_at.get(test) == where for test, where in broken.items()}


# -- main ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each tool per parallelism (default 3)")
    ap.add_argument("--check-failing", action="store_true",
                    help="first check that each assert of the chainsaw tests fails its test when it expects a "
                         "wrong value (about a minute)")
    args = ap.parse_args()
    binary = chainsaw_binary()
    version = subprocess.run([str(binary), "version"], capture_output=True, text=True).stdout.split()
    print(f"chainsaw: {binary} ({' '.join(version[:2])})", file=sys.stderr)

    # tool -> parallelism -> wall seconds of each run
    times: dict[str, dict[int, list[float]]] = {"ours": {1: [], 2: []}, "chainsaw": {1: [], 2: []},
                                                "chainsaw-shared-ns": {1: []}}
    per_ours: dict[str, list[float]] = {n: [] for n in SCENARIOS}
    per_chainsaw: dict[str, list[float]] = {n: [] for n in SCENARIOS}
    cleanup_chainsaw: dict[str, list[float]] = {n: [] for n in SCENARIOS}
    can_fail: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="peer-chainsaw-") as tmp, \
            EmbeddedCluster(crd_paths=REVISIONS[DEFAULT].embedded_crds) as cluster:
        work = Path(tmp)
        tests = work / "chainsaw-tests"
        write_chainsaw_tests(tests)
        kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        reference_gateway_class(kube)
        implementation = start_reference(cluster.kubeconfig, work / "implementation.log", DEFAULT)
        try:
            if args.check_failing:
                can_fail = check_chainsaw_can_fail(binary, cluster.kubeconfig, work)
                if not all(can_fail.values()):
                    _fail(f"a chainsaw assert made wrong did not fail its test there: {can_fail}")
                wait_clean(kube)

            def ours(parallel: int, record: bool) -> float:
                took, per = run_ours(cluster.kubeconfig, parallel, work)
                for n, t in per.items():
                    if record and parallel == 1:
                        per_ours[n].append(t)
                return took

            def chainsaw(parallel: int, record: bool) -> float:
                took, per, cleanup = run_chainsaw(binary, cluster.kubeconfig, tests, parallel, work)
                for n, t in per.items():
                    if record and parallel == 1:
                        per_chainsaw[n].append(t)
                        cleanup_chainsaw[n].append(cleanup[n])
                return took

            def chainsaw_shared_ns(parallel: int, record: bool) -> float:
                return run_chainsaw(binary, cluster.kubeconfig, tests, parallel, work, namespace="chainsaw-shared")[0]

            tools = {"ours": ours, "chainsaw": chainsaw, "chainsaw-shared-ns": chainsaw_shared_ns}
            # One untimed run of each first: the implementation's first reconciles, disk caches.
            for tool in tools.values():
                tool(1, False)
                wait_clean(kube)
            for parallel in (1, 2):
                names = [n for n in tools if parallel in times[n]]
                for i in range(args.runs):
                    # Rotate who goes first, so that drift in the machine's load hits all alike.
                    for name in names[i % len(names):] + names[:i % len(names)]:
                        took = tools[name](parallel, True)
                        times[name][parallel].append(took)
                        print(f"  parallel {parallel} run {i + 1}: {name:<18} {took:6.1f} s", file=sys.stderr)
                        wait_clean(kube)
        finally:
            stop(implementation)

    rows = [("work", f"{len(SCENARIOS)} status scenarios, reference implementation, embedded cluster, "
                     f"{args.runs} runs each, wall clock of the whole process")]
    data: dict = {"chainsaw_version": CHAINSAW_VERSION, "runs": args.runs, "wall_s": {}, "ratio": {},
                  "scenarios": {}}
    ours_p50 = {}
    for parallel in (1, 2):
        label = "sequential" if parallel == 1 else "parallel 2"
        s_ours, s_cs = summary(times["ours"][parallel]), summary(times["chainsaw"][parallel])
        ours_p50[parallel] = s_ours["p50"]
        ratio = s_cs["p50"] / s_ours["p50"]
        rows += [(f"{label}: our suite (s)", _fmt(s_ours, times["ours"][parallel])),
                 (f"{label}: chainsaw (s)", _fmt(s_cs, times["chainsaw"][parallel])),
                 (f"{label}: chainsaw / ours (p50)", f"{ratio:.2f}x" + ("  (target 2x: met)" if ratio >= 2
                                                                         else "  (target 2x: not met)"))]
        data["wall_s"][str(parallel)] = {"ours": s_ours, "chainsaw": s_cs}
        data["ratio"][str(parallel)] = ratio
    s_shared = summary(times["chainsaw-shared-ns"][1])
    rows += [("sequential: chainsaw --namespace, one shared (s)", _fmt(s_shared, times["chainsaw-shared-ns"][1])),
             ("  its ratio to ours (less isolation than ours)", f"{s_shared['p50'] / ours_p50[1]:.2f}x")]
    data["wall_s"]["1"]["chainsaw_shared_namespace"] = s_shared
    data["ratio"]["1_shared_namespace"] = s_shared["p50"] / ours_p50[1]
    for name, (test_file, _, note) in SCENARIOS.items():
        o, c, cl = (statistics.median(per_ours[name]), statistics.median(per_chainsaw[name]),
                    statistics.median(cleanup_chainsaw[name]))
        rows.append((f"  {name} (sequential, p50 s)",
                     f"ours {o:.1f}, chainsaw {c:.1f} (cleanup {cl:.1f} of it); chainsaw test: {note}"))
        data["scenarios"][name] = {"our_test": f"conformance/tests/{test_file}", "ours_p50_s": o,
                                   "chainsaw_p50_s": c, "chainsaw_cleanup_p50_s": cl, "chainsaw_leaves_out": note}
    if can_fail:
        rows.append(("chainsaw asserts that fail when made wrong", f"{sum(can_fail.values())} of {len(can_fail)}"))
        data["chainsaw_fails_on_wrong_expectation"] = can_fail
    report("peer_chainsaw", rows, data)


def _fmt(s: dict, values: list[float]) -> str:
    return f"p50 {s['p50']:.1f}  min {s['min']:.1f}  max {s['max']:.1f}  ({', '.join(f'{v:.1f}' for v in values)})"


if __name__ == "__main__":
    main()
