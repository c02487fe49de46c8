"""The whole suite, run as a user runs it, passes on the embedded cluster with the reference
implementation, for every API revision; on a user's cluster it judges the APIs it finds (one or
both) and says which; forcing the wrong revision fails and says why."""

import subprocess
import sys
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pytest

from conformance.revisions import DEFAULTS, NOT_APPLICABLE_PREFIX, REVISIONS

from .suite_run import PASSED, PYTEST, REPO, SKIPPED, run_suite, start_reference, stop, with_api

# The suite's tiers that need only the API server (no implementation).
API_SERVER_TESTS = ["conformance/tests/test_schema.py", "conformance/tests/test_status_subresource.py"]


def _junit(path: Path) -> tuple[dict, dict[str, str]]:
    """(counts, {test name: skip reason}) of a JUnit XML file."""
    suite = ET.parse(path).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    skips = {f"{case.get('classname')}::{case.get('name')}": skipped.get("message", "")
             for case in suite.iter("testcase") for skipped in case.findall("skipped")}
    return counts, skips


def revision_line(out: str, name: str) -> str:
    """The line of a run's output that names the revision judged for that revision's API."""
    rev = REVISIONS[name]
    prefix = f"API {rev.api.name}: revision {name} ({rev.title})"
    return next((line for line in out.splitlines() if line.startswith(prefix)), f"(no line {prefix!r})")


@pytest.mark.parametrize("revision", ["default", *sorted(REVISIONS)])
def test_suite_passes_on_embedded(tmp_path, revision):
    """`--api-revision R` on the embedded cluster installs R's CRD and runs the reference
    implementation for R; without it, the default revisions' CRDs (both APIs) are installed and detected."""
    junit = tmp_path / "junit.xml"
    forced = [] if revision == "default" else ["--api-revision", revision]
    result = subprocess.run([*PYTEST, f"--junitxml={junit}", *forced],
                            cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    how = "forced by --api-revision; the installed CRD matches it" if forced else "detected from the installed CRD"
    for name in DEFAULTS if revision == "default" else [revision]:
        assert revision_line(result.stdout, name).endswith(how), result.stdout[:2000]
    counts, skips = _junit(junit)
    assert counts["failures"] == counts["errors"] == 0, counts
    assert counts["tests"] >= 160, counts
    # The only skips are tests and cases the revision does not have.
    others = {name: why for name, why in skips.items() if not why.startswith(NOT_APPLICABLE_PREFIX)}
    assert not others, others
    assert counts["tests"] - counts["skipped"] >= 140, counts


@contextmanager
def cluster_up(api_revisions: str):
    """The embedded cluster with these revisions' CRDs, started the way a user starts it; its kubeconfig."""
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "cluster", "up", "--api-revision", api_revisions],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kubeconfig = proc.stdout.readline().strip()  # the first line of stdout is the kubeconfig path
        assert kubeconfig, f"cluster up printed no kubeconfig path: {proc.stderr.read() if proc.poll() else ''}"
        yield kubeconfig
    finally:
        stop(proc)


@pytest.fixture
def v05_cluster():
    with cluster_up("v0.5") as kubeconfig:
        yield kubeconfig


def test_a_cluster_of_the_ga_api_alone_is_judged_on_it(tmp_path):
    """A cluster of GIE v1.5 or later (no v1alpha2 CRD): the run finds v1 alone, judges it whole with the
    implementation, and its v1alpha2 tests are not-applicable."""
    from conformance.features import REFERENCE_GATEWAY_CLASS

    with cluster_up("v1.6") as kubeconfig:
        implementation = start_reference(Path(kubeconfig), tmp_path / "implementation.log", "v1.6",
                                         extra_args=["--gateway-class", REFERENCE_GATEWAY_CLASS,
                                                     "--install-gateway-class"])
        try:
            run = run_suite([f"--kubeconfig={kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS, "-n", "2",
                             "-p", "no:allure_pytest"], tmp_path / "results")
        finally:
            stop(implementation)
    assert run.returncode == 0, run.output[-4000:]
    # The workers clean up before they tell the controller they are done, so no teardown interrupts them.
    assert "interrupted" not in run.output, run.output[-2000:]
    assert "API v1alpha2: not installed (inferencepools.inference.networking.x-k8s.io); its tests are " \
           "not-applicable" in run.output, run.output[:2000]
    assert revision_line(run.output, "v1.6").endswith("detected from the installed CRD"), run.output[:2000]
    passed = run.with_outcome(PASSED)
    assert with_api("test_pool_accepted.py::test_pool_accepted", "v1") in passed, sorted(run.outcomes)[:20]
    assert len({t for t in passed if "[v1]" in t or "[v1-" in t}) >= 150, len(passed)
    alpha = {t for t in run.outcomes if "[v1alpha2" in t}
    assert alpha and alpha <= run.with_outcome(SKIPPED), sorted(alpha - run.with_outcome(SKIPPED))[:10]


def test_an_installed_api_left_out_by_api_revision_is_named(tmp_path):
    """A cluster of GIE v1.0 - v1.4 has both APIs; narrowed to one with --api-revision, the run says
    which other API it found and does not judge."""
    with cluster_up("v0.5,v1.4") as kubeconfig:
        run = subprocess.run([*PYTEST, f"--kubeconfig={kubeconfig}", "--api-revision", "v1.4",
                              f"--results-dir={tmp_path}", API_SERVER_TESTS[1]],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert revision_line(run.stdout, "v1.4").endswith("forced by --api-revision; the installed CRD matches it")
    assert ("API v1alpha2: installed, revision v0.5 (GIE v0.5.x); not judged: --api-revision v1.4 names only "
            "API v1") in run.stdout, run.stdout[:2000]
    assert "[v1alpha2" not in run.stdout


def test_revision_detected_and_wrong_revision_named(v05_cluster):
    run = [*PYTEST, f"--kubeconfig={v05_cluster}"]
    # Detected from the installed CRD: the v0.5 expectations hold.
    detected = subprocess.run([*run, *API_SERVER_TESTS, "-k", "fresh-pool-status or parentRef-name-missing"],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
    assert detected.returncode == 0, detected.stdout[-4000:] + detected.stderr[-2000:]
    assert revision_line(detected.stdout, "v0.5").endswith("detected from the installed CRD"), detected.stdout

    # Forced to the seed: the run goes on, fails where the revisions differ, and
    # names the mismatch at the start, with every failure and at the end.
    forced = subprocess.run([*run, "--api-revision", "seed", *API_SERVER_TESTS],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    out = forced.stdout
    assert forced.returncode == 1, out[-4000:] + forced.stderr[-2000:]
    mismatch = ("API revision mismatch: --api-revision forces seed, but the installed "
                "inferencepools.inference.networking.x-k8s.io CRD is v0.5 (GIE v0.5.x)")
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    for name in ("fresh-pool-status", "parent-without-conditions-gets-default", "parentRef-name-missing",
                 "test_status_on_create_is_ignored"):
        assert any(name in line for line in failed), (name, failed)
    assert out.count(mismatch) >= len(failed) + 2, out[-4000:]  # start, each failure, end
    assert out.splitlines()[0].startswith(mismatch), out[:1000]
