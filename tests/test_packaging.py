"""The suite as a package: what it carries, where it finds its files, how it runs from anywhere.

The whole proof, an installed wheel passing the suite from outside the checkout, is the
packaging check (`tox -e packaging`, hack/check_packaging.py, run by .ci/run); these are its
quick parts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conformance import data, options, revisions
from conformance.cluster import binary

REPO = Path(__file__).resolve().parents[1]


def test_every_file_the_suite_reads_is_shipped():
    shipped = {REPO / p for p in data.shipped(REPO)}
    read = [r.crd for r in revisions.REVISIONS.values()]
    read += sorted(revisions.GATEWAY_API_CRDS.glob("*.yaml"))
    for sub in ("schema", "status", "rbac"):
        read += sorted((data.MANIFESTS / sub).rglob("*.yaml"))  # schema/: one folder per API
    assert {p.parent.name for p in (data.MANIFESTS / "schema").rglob("_base.yaml")} == set(revisions.APIS)
    read += [p for p in data.CONTROLPLANE.iterdir() if p.suffix in data.CONTROLPLANE_SUFFIXES]
    assert data.ROOT == REPO and not data.installed()  # a checkout reads its own files
    missing = [str(p.relative_to(REPO)) for p in read if p not in shipped]
    assert not missing, missing
    assert {"controlplane/go.mod", "controlplane/go.sum", "controlplane/main.go"} <= {
        p.as_posix() for p in data.shipped(REPO)}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist, and the wheel built from it, as `python -m build` makes them."""
    pytest.importorskip("build", reason="python -m build is not installed (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return out


def test_sdist_and_wheel_carry_the_data(dist, tmp_path):
    shipped = [p.as_posix() for p in data.shipped(REPO)]
    with tarfile.open(next(dist.glob("*.tar.gz"))) as t:
        in_sdist = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert set(shipped) <= in_sdist
    assert not any(n.startswith("tests/") for n in in_sdist)  # the project's tests run from a checkout
    wheel = next(dist.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    assert {f"conformance/_data/{p}" for p in shipped} <= names
    assert {n.split("/", 1)[0] for n in names} - {n.split("/", 1)[0] for n in names if ".dist-info" in n} == {
        "conformance", "reference_gateway"}  # no top-level tests package
    # Unpacked, the package finds its own copy, complete, and keys the control plane's cache as the checkout does.
    code = ("import json; from conformance import data; from conformance.cluster import binary; "
            "print(json.dumps([data.installed(), str(data.MANIFESTS), data.problem(), str(binary.cached_path())]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "site", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    installed, manifests, problem, kcp = json.loads(done.stdout)
    assert installed and manifests == str(tmp_path / "site" / "conformance" / "_data" / "manifests")
    assert problem is None
    assert kcp == str(binary.cached_path())


def test_help_groups_every_option_once():
    grouped = [name for _g, _h, names in options.GROUPS for name in names]
    assert sorted(grouped) == sorted([*options._FLAGS, *options.RUN_FLAGS])
    out = subprocess.run([sys.executable, "-m", "conformance", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    headings = [ln.rstrip(":") for ln in out.splitlines() if ln.startswith("InferencePool conformance: ")]
    assert headings == [h for _g, h, _n in options.GROUPS]
    for name in grouped:
        assert f"--{options.CLI_NAMES.get(name, name)}" in out, name


def test_version_names_the_revisions(tmp_path):
    out = subprocess.run([sys.executable, "-m", "conformance", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60).stdout
    assert out.startswith("inferencepool-conformance ")
    assert all(name in out for name in revisions.REVISIONS)


@pytest.mark.parametrize("argv", [
    [sys.executable, "-m", "conformance", "--collect-only", "-q"],
    [sys.executable, "-m", "pytest", "--pyargs", "conformance.tests", "--collect-only", "-q"],
], ids=["console", "pyargs"])
def test_runs_from_outside_the_checkout(tmp_path, argv):
    """From an empty directory, both ways collect the suite's tests and no others, and leave no cache."""
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    ids = [ln for ln in done.stdout.splitlines() if "::" in ln]
    listed = subprocess.run([sys.executable, "-m", "conformance", "tests", "--json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    keys = {t["key"] for t in json.loads(listed.stdout)}
    assert {i.rsplit("/", 1)[-1] for i in ids} == keys
    assert list(tmp_path.iterdir()) == []  # no .pytest_cache, nothing written by a collection
