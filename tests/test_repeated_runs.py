"""Run after run on one cluster, the suite passes every time and leaves nothing behind: the flake hunt.

The whole suite runs REPEAT_RUNS times in a row (IPC_REPEAT_RUNS;
`IPC_REPEAT_RUNS=20 pytest tests/test_repeated_runs.py -s`) against one embedded
cluster with the reference implementation running, as an implementer runs it
against theirs. Every run must pass, and afterwards the cluster must hold
exactly the objects it held before the first run.

Without IPC_REPEAT_RUNS it is skipped: every run of the project's tests already
has runs in a row on shared clusters, with the same two checks, in
test_fault_catching.py (the baseline and the benign runs must pass whole, and
each of its runs, faulty ones too, must leave its cluster as it found it).
"""

from __future__ import annotations

import os
import time

import pytest

from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.kube import Kube

from .suite_run import FAILED, PASSED, run_suite

REPEAT_RUNS = int(os.environ.get("IPC_REPEAT_RUNS", "0"))
# Everything the suite may create: namespaces, the objects in them, GatewayClasses.
KINDS = [("v1", "Namespace"), ("v1", "Service"), ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"),
         ("gateway.networking.k8s.io/v1", "Gateway"), ("gateway.networking.k8s.io/v1", "HTTPRoute"),
         ("gateway.networking.k8s.io/v1", "GatewayClass")]


def inventory(kube: Kube) -> set[tuple[str, str, str, str]]:
    """(kind, namespace, name, uid) of every object of KINDS, in all namespaces."""
    return {(kind, o["metadata"].get("namespace", ""), o["metadata"]["name"], o["metadata"]["uid"])
            for api_version, kind in KINDS for o in kube.list(api_version, kind, None)["items"]}


@pytest.mark.skipif(REPEAT_RUNS < 1, reason="the flake hunt: set IPC_REPEAT_RUNS (runs in a row and "
                    "what they leave behind are checked on every run by test_fault_catching.py)")
def test_runs_pass_and_leave_nothing_behind(live_cluster, tmp_path, capsys):
    cluster, kube = live_cluster
    before = inventory(kube)
    rows, failures = [], {}
    for i in range(1, REPEAT_RUNS + 1):
        results = tmp_path / f"run-{i}"
        results.mkdir()
        started = time.monotonic()
        run = run_suite([f"--kubeconfig={cluster.kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS,
                         "-n", "2"], results)
        rows.append(f"run {i:2}: {time.monotonic() - started:5.1f}s  exit {run.returncode}  "
                    f"passed {len(run.with_outcome(PASSED))}  failed {len(run.with_outcome(FAILED))}")
        if run.returncode != 0 or run.with_outcome(FAILED):
            failures[i] = sorted(run.with_outcome(FAILED)) or run.output[-2000:]
    after = inventory(kube)
    summary = (f"{REPEAT_RUNS} runs, {len(failures)} with failures; "
               f"objects left behind: {len(after - before)}, removed: {len(before - after)}")
    with capsys.disabled():
        print("\n" + "\n".join(rows) + "\n" + summary)
    assert not failures, failures
    assert after == before, {"left behind": sorted(after - before), "removed": sorted(before - after)}
