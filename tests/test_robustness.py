"""The suite under faults in its environment: the API server or the implementation
dying in the middle of a run. It must not hang, must blame the environment and
not the implementation, and must go on judging once the fault is gone."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.kube import Kube

from .suite_run import SUITE_LABEL, finished, spawn_suite, stop

# Less than one status wait's timeout (InferencePoolMustHaveCondition, 300 s): a run
# that takes longer has sat out at least one wait that could not succeed.
RUN_BOUND = 240


def suite_namespaces(kube: Kube) -> list[str]:
    return [ns["metadata"]["name"] for ns in kube.list("v1", "Namespace", None, label_selector=SUITE_LABEL)["items"]]


def wait_until(what: str, ready, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(0.1)


def allure_results(results_dir: Path) -> list[dict]:
    out = []
    for path in (results_dir / "allure-results").glob("*-result.json"):
        try:
            out.append(json.loads(path.read_text()))
        except ValueError:  # being written
            pass
    return out


def failure_categories(output: str) -> str:
    return next((line for line in output.splitlines() if line.startswith("Failures by category:")), "")


def test_api_server_killed_and_restarted_mid_run(live_cluster, tmp_path):
    cluster, kube = live_cluster
    results = tmp_path / "results"
    results.mkdir()
    started = time.monotonic()
    proc, out = spawn_suite([f"--kubeconfig={cluster.kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS],
                            results)
    try:
        # The status tests come first (file order); kill the API server among them.
        wait_until("the suite's third namespace", lambda: len(suite_namespaces(kube)) >= 3)
        cluster.kill("kube-apiserver")
        time.sleep(2)
        cluster.restart("kube-apiserver")
        back = time.time()
        run = finished(proc, out, results, RUN_BOUND)
    finally:
        stop(proc)
    took = time.monotonic() - started

    assert run.returncode in (0, 1), run.output[-3000:]
    assert len(run.outcomes) >= 160, run.output[-3000:]
    # What failed, failed for the environment; nothing is blamed on the implementation.
    categories = failure_categories(run.output)
    assert "Implementation defect" not in categories, categories + "\n" + run.output[-3000:]
    # Every test that started once the API server was back passed.
    later = [r for r in allure_results(results) if r["start"] / 1000 > back + 1]
    assert len(later) >= 100, f"only {len(later)} tests started after the restart"
    bad = [(r["fullName"], r["status"]) for r in later if r["status"] not in ("passed", "skipped")]
    assert not bad, bad
    # And the run cleaned up after itself.
    assert suite_namespaces(kube) == [], f"namespaces left after the run ({took:.0f}s)"


def _children(pid: int) -> list[int]:
    """Every descendant of pid; a process that exits while it is being read simply has none."""
    out = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            out += [int(child), *_children(int(child))]
    return out


def _implementation_pid(suite_pid: int) -> int | None:
    for pid in _children(suite_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"reference_gateway" in argv:
            return pid
    return None


def test_implementation_killed_mid_run(tmp_path):
    """On the embedded default the suite starts the implementation; when it dies, every test
    that needs it fails at once, saying so, and the tests that do not need it still pass."""
    proc, out = spawn_suite([], tmp_path)
    try:
        wait_until("the implementation to start", lambda: _implementation_pid(proc.pid) is not None)
        # Let two status tests pass first (Allure writes each result as the test ends).
        wait_until("two tests to pass", lambda: sum(r["status"] == "passed" for r in allure_results(tmp_path)) >= 2)
        os.kill(_implementation_pid(proc.pid), signal.SIGKILL)
        killed = time.time()
        run = finished(proc, out, tmp_path, RUN_BOUND)
    finally:
        stop(proc)

    assert run.returncode == 1, run.output[-3000:]
    later = [r for r in allure_results(tmp_path) if r["start"] / 1000 > killed + 1]
    status_failed = [r for r in later if r["status"] in ("failed", "broken")
                     and not r["fullName"].startswith(("conformance.tests.test_schema",
                                                       "conformance.tests.test_status_subresource"))]
    assert status_failed, "no status test failed after the implementation was killed"
    for r in status_failed:
        assert "the implementation under test exited with code -9" in r["statusDetails"]["message"], r
    schema = [r for r in later if r["fullName"].startswith("conformance.tests.test_schema")]
    assert schema and all(r["status"] in ("passed", "skipped") for r in schema)
    categories = failure_categories(run.output)
    assert "Environment: implementation not ready" in categories, categories
    assert "Implementation defect" not in categories, categories
