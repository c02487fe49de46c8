"""What one systemic defect costs a run, and what a slow but correct implementation costs.

    python bench/systemic.py [--workers 1] [--fault parentref-wrong-group] [--slow-seconds 30]

Two whole-suite runs on the embedded cluster, with the upstream default
timeouts (300 s per status wait), against the reference implementation:

1. with the fault `parentref-wrong-group` (every pool entry names its Gateway
   with the group of another API): the run must end within 3 minutes, every
   status test that reads a pool entry failing with a first line that names
   `parentRef.group` (or `parentRef.apiVersion` where the revision spells it
   that way);
2. with the benign behaviour `slow` (every status write comes 30 s after the
   change that causes it): every test must pass.

Each run is `pytest --kubeconfig=... --gateway-class reference` against a
cluster of its own, the way an implementer runs the suite; the time is the
pytest process's, start to exit.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import report  # noqa: E402
from kubernetes import config  # noqa: E402

from conformance.cluster.embedded import EmbeddedCluster  # noqa: E402
from conformance.features import REFERENCE_CONTROLLER, REFERENCE_GATEWAY_CLASS  # noqa: E402
from conformance.kube import Kube  # noqa: E402
from conformance.revisions import DEFAULT, REVISIONS  # noqa: E402
from tests.suite_run import PYTEST, clean_env, junit_outcomes, reference_gateway_class, stop  # noqa: E402

GROUP_FIELDS = ("parentRef.group", "parentRef.apiVersion")


def run(switches: list[str], workers: int) -> tuple[float, dict[str, str], str]:
    """(seconds, test id -> outcome, output) of one whole-suite run against the reference implementation."""
    with EmbeddedCluster(crd_paths=REVISIONS[DEFAULT].embedded_crds) as cluster, \
            tempfile.TemporaryDirectory() as results:
        reference_gateway_class(Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig))))
        log = open(Path(results) / "implementation.log", "wb")
        implementation = subprocess.Popen(
            [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
             "--controller-name", REFERENCE_CONTROLLER, "--api-revision", DEFAULT, *switches],
            cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        argv = [*PYTEST, f"--results-dir={results}", f"--kubeconfig={cluster.kubeconfig}",
                "--gateway-class", REFERENCE_GATEWAY_CLASS, "--skip-traffic"]  # no kubelet: no Pods run
        if workers > 1:
            argv += ["-n", str(workers)]
        try:
            started = time.monotonic()
            done = subprocess.run(argv, cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True)
            elapsed = time.monotonic() - started
        finally:
            stop(implementation)
            log.close()
        return elapsed, junit_outcomes(Path(results) / "junit.xml"), done.stdout + done.stderr


def status_tests(outcomes: dict[str, str]) -> set[str]:
    return {t for t in outcomes if not t.startswith(("test_schema.py", "test_status_subresource.py",
                                                     "test_crd_drift.py"))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=1, help="pytest-xdist workers (1: the README's plain pytest)")
    ap.add_argument("--fault", default="parentref-wrong-group")
    ap.add_argument("--slow-seconds", type=float, default=30)
    args = ap.parse_args()

    print(f"run 1: fault {args.fault}, default timeouts ...", file=sys.stderr, flush=True)
    fault_s, fault_outcomes, fault_out = run(["--fault", args.fault], args.workers)
    status = status_tests(fault_outcomes)
    judged = {t for t in status if fault_outcomes[t] != "skipped"}
    failed = {t for t in judged if fault_outcomes[t] == "failed"}
    # Tests whose rule reads no pool entry (C12: an unrouted pool has none; C13: the
    # HTTPRoute's own status) rightly pass: the fault is in the pool entries only.
    passed = sorted(judged - failed)
    group_lines = sum(1 for line in fault_out.splitlines()
                      if line.startswith("E ") and any(f"{f} " in line for f in GROUP_FIELDS))

    print(f"run 2: behaviour slow ({args.slow_seconds:g} s), default timeouts ...", file=sys.stderr, flush=True)
    slow_s, slow_outcomes, slow_out = run(["--behaviour", "slow", "--slow-seconds", str(args.slow_seconds)],
                                          args.workers)
    slow_failed = sorted(t for t, o in slow_outcomes.items() if o == "failed")

    rows = [
        (f"fault {args.fault}: whole suite (s)", f"{fault_s:.0f}  (target <= 180)"),
        ("  status tests failed / judged", f"{len(failed)} / {len(judged)}"),
        ("  failures whose first line names the group", f"{group_lines}"),
        ("  passed (their rule reads no pool entry)", ", ".join(passed) or "none"),
        (f"slow ({args.slow_seconds:g} s per write): whole suite (s)", f"{slow_s:.0f}"),
        ("  failed tests", f"{len(slow_failed)}" + (f": {', '.join(slow_failed)}" if slow_failed else "")),
    ]
    report("systemic", rows, {
        "workers": args.workers, "fault": args.fault, "fault_wall_s": fault_s,
        "fault_status_failed": len(failed), "fault_status_judged": len(judged), "fault_group_lines": group_lines,
        "fault_passed": passed, "slow_seconds": args.slow_seconds, "slow_wall_s": slow_s,
        "slow_failed": slow_failed, "slow_tests": len(slow_outcomes)})
    if group_lines != len(failed) or fault_s > 180 or slow_failed:
        sys.exit("the figures above miss the target")


if __name__ == "__main__":
    main()
