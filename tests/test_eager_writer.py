"""The API-server tiers are immune to a controller that writes every pool's status at once.

The schema, defaulting and S10 tiers (conformance/tests/test_schema.py and
test_status_subresource.py) judge the API server and its CRD alone, so nothing
an implementation does may change their verdict. A real controller wrote status
on every InferencePool the moment it appeared, routed or not, in any namespace,
and made those tiers race: a PUT with the create's resourceVersion answered 409,
a read-back saw the controller's write instead of what the create stored.

Here the reference implementation runs with `--behaviour eager-writer` (the
same writer: `status.parent: []` on every new pool within milliseconds, and on
a revision with a status default the placeholder removed), and the two tiers
run IPC_EAGER_RUNS times in a row (default 2; the target for a soak is 20) on
each revision whose fresh pools differ: seed (no status default) and v0.5 (the
placeholder parent). Every run must pass whole, and the implementation's log
must show that it did write the tiers' pools while they ran.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube
from conformance.revisions import REVISIONS

from .suite_run import FAILED, run_suite, show, start_reference, stop

RUNS = int(os.environ.get("IPC_EAGER_RUNS", "2"))
TIER = ["conformance/tests/test_schema.py", "conformance/tests/test_status_subresource.py"]
RUN_TIMEOUT = 600.0
# A write on a pool no route leads to: "wrote InferencePool ns/name status parent=none (4.5 ms after the event, ...".
EAGER_WRITE = re.compile(r"wrote InferencePool (\S+) status parent=none \((\d+\.\d) ms after the event")


def _failure_lines(results: Path) -> list[str]:
    junit = results / "junit.xml"
    if not junit.exists():
        return []
    lines = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                first = (node.get("message") or tag).strip().splitlines()[:1]
                lines.append(f"{case.get('name')}: {first[0] if first else tag}")
                break
    return lines


@pytest.mark.parametrize("revision", ["seed", "v0.5"])
def test_api_server_tiers_pass_beside_an_eager_writer(revision, tmp_path, capsys):
    assert RUNS >= 1, "IPC_EAGER_RUNS must be at least 1"
    rows, problems = [], []
    log = tmp_path / "implementation.log"
    with EmbeddedCluster(crd_paths=REVISIONS[revision].embedded_crds) as cluster:
        Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))  # the cluster answers
        implementation = start_reference(cluster.kubeconfig, log, revision, behaviours=["eager-writer"])
        try:
            for i in range(1, RUNS + 1):
                results = tmp_path / f"run-{i}"
                run = run_suite([f"--kubeconfig={cluster.kubeconfig}", *TIER, "-n", "2"], results,
                                timeout=RUN_TIMEOUT)
                failed = sorted(run.with_outcome(FAILED))
                if run.returncode != 0 or failed or not run.outcomes:
                    detail = _failure_lines(results) or run.output.strip().splitlines()[-20:]
                    problems.append(f"run {i}: exit {run.returncode}, {len(failed)} failed (results: {results})\n  "
                                    + "\n  ".join(detail))
                rows.append(f"run {i:>2}: {len(run.outcomes):>3} tests, "
                            + (f"{len(failed)} FAILED: {', '.join(failed)}" if failed else "all passed")
                            + ("" if run.returncode in (0, 1) else f" (exit {run.returncode})"))
            alive = implementation.poll() is None
        finally:
            stop(implementation)
    writes = EAGER_WRITE.findall(log.read_text(errors="replace"))
    delays = sorted(float(ms) for _, ms in writes)
    median = f", median {delays[len(delays) // 2]:.1f} ms after the pool's event" if delays else ""
    summary = (f"eager-writer ({revision}): {RUNS - len(problems)}/{RUNS} runs of the schema and S10 tiers "
               f"passed whole; the implementation wrote {len(writes)} status(es) on pools no route leads to"
               + median)
    show(capsys, "\n" + "\n".join(rows) + "\n" + summary)
    assert alive, f"the implementation exited during the runs (log: {log})"
    assert writes, f"the eager writer wrote no pool of the tiers: it was not exercised (log: {log})"
    assert not problems, "\n".join(problems) + f"\n\n{summary}"
