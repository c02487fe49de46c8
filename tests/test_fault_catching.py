"""The suite catches a wrong implementation, and blames the right tests.

For each deliberate mistake in reference_gateway/faults.py, the reference
implementation is started with only that mistake switched on, and the whole
conformance suite is run against it the way an implementer runs it on their
own cluster: a pytest subprocess with --kubeconfig and --gateway-class. The
tests that tests/fault_catches.yaml names for the fault must fail, and every
other test must pass (or be not-applicable): a fault caught by the wrong test
is a collateral failure and counts against the suite. A baseline run with no
fault must pass whole.

Runs share control planes: each of WORKERS clusters takes the next fault when
it is free (as in test_crd_mutants.py), and each run uses two pytest-xdist
workers, since a faulty run spends most of its time waiting for status that
never comes (shortened to 10 s per wait, against the upstream 300 s). Between runs nothing of the previous
one is left: the suite deletes its namespaces and waits for them to go, and the
implementation is stopped before the next starts.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.kube import Kube
from conformance.revisions import DEFAULT, GATEWAY_API_CRDS, REVISIONS
from reference_gateway.faults import FAULTS

from .crd_swap import install
from .suite_run import (FAILED, SuiteRun, on_free_workers, reference_gateway_class, run_suite, show,
                        start_reference, started_clusters, stop)

EXPECTED = yaml.safe_load((Path(__file__).parent / "fault_catches.yaml").read_text())
WORKERS = 2
# The reference implementation answers in milliseconds; a fault that makes it never
# answer should cost seconds, not the upstream five minutes per test.
TIMEOUTS = ";".join(f"{name}:10" for name in (
    "InferencePoolMustHaveCondition", "InferencePoolMustNotHaveParent", "HTTPRouteMustHaveCondition",
    "RouteMustHaveParents", "HTTPRouteMustNotHaveParents", "GatewayMustHaveCondition"))


@dataclass
class Verdict:
    fault: str  # "" for the baseline
    revision: str
    run: SuiteRun
    seconds: float

    @property
    def failed(self) -> set[str]:
        return self.run.with_outcome(FAILED)

    @property
    def expected(self) -> set[str]:
        return set(EXPECTED[self.fault]["caught_by"]) if self.fault else set()

    @property
    def caught(self) -> bool:
        return bool(self.failed) and self.failed == self.expected


@dataclass
class Worker:
    cluster: EmbeddedCluster
    kube: Kube
    results: Path
    revision: str = DEFAULT

    def use_revision(self, name: str) -> None:
        if name != self.revision:
            refusal = install(self.kube, yaml.safe_load(REVISIONS[name].crd.read_text()))
            assert refusal is None, f"the {name} CRD was refused: {refusal}"
            self.revision = name

    def judge(self, fault: str) -> Verdict:
        revision = EXPECTED[fault].get("revision", DEFAULT) if fault else DEFAULT
        started = time.monotonic()
        self.use_revision(revision)
        implementation = start_reference(self.cluster.kubeconfig, self.results / f"implementation-{fault or 'baseline'}.log",
                                         revision, [fault] if fault else [])
        results = Path(tempfile.mkdtemp(prefix=f"{fault or 'baseline'}-", dir=self.results))
        try:
            run = run_suite([f"--kubeconfig={self.cluster.kubeconfig}",
                             "--gateway-class", REFERENCE_GATEWAY_CLASS,
                             "--timeout-config-overrides", TIMEOUTS,
                             # Most of a faulty run is waiting out timeouts: two at a time.
                             "-n", "2"], results)
        finally:
            stop(implementation)
        if run.returncode not in (0, 1) or not run.outcomes:
            tail = "\n".join(run.output.strip().splitlines()[-30:])
            pytest.fail(f"the suite could not run with fault {fault or '(none)'} (exit {run.returncode}), "
                        f"which says nothing about the fault (results: {results}):\n{tail}", pytrace=False)
        shutil.rmtree(results, ignore_errors=True)
        return Verdict(fault, revision, run, time.monotonic() - started)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """WORKERS clusters with the default revision's CRDs and the reference GatewayClass."""
    with started_clusters(WORKERS, [REVISIONS[DEFAULT].crd, GATEWAY_API_CRDS]) as clusters:
        workers = []
        for i, c in enumerate(clusters):
            kube = Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))
            reference_gateway_class(kube)
            workers.append(Worker(c, kube, tmp_path_factory.mktemp(f"fault-runs-{i}")))
        yield workers


def table(verdicts: list[Verdict]) -> str:
    """fault -> the tests that caught it, and any the fault should not have touched."""
    width = max(len(v.fault) for v in verdicts)
    lines = [f"{'fault':<{width}}  {'rev':<4}  {'secs':>5}  caught by"]
    for v in verdicts:
        said = ", ".join(sorted(v.failed & v.expected)) or "NOT CAUGHT"
        if v.failed - v.expected:
            said += "  | COLLATERAL: " + ", ".join(sorted(v.failed - v.expected))
        if v.expected - v.failed:
            said += "  | MISSED: " + ", ".join(sorted(v.expected - v.failed))
        lines.append(f"{v.fault:<{width}}  {v.revision:<4}  {v.seconds:5.1f}  {said}")
    return "\n".join(lines)


def test_every_fault_is_caught_by_its_tests_alone(workers, capsys):
    started = time.monotonic()
    assert sorted(EXPECTED) == sorted(FAULTS), "tests/fault_catches.yaml must list every fault, and only those"
    for fault, entry in EXPECTED.items():
        unknown = set(entry) - {"revision", "caught_by"}
        assert not unknown and entry.get("caught_by"), f"{fault}: needs caught_by, and nothing else but revision"

    # The clean implementation must pass whole, or every "catch" below would mean nothing.
    baseline = workers[0].judge("")
    assert baseline.run.returncode == 0 and not baseline.failed, (
        f"the suite fails on the reference implementation with no fault: {sorted(baseline.failed)}\n"
        + baseline.run.output[-3000:])
    known = set(baseline.run.outcomes)

    # Faults of other revisions last, so each cluster swaps its CRD at most once.
    order = sorted(FAULTS, key=lambda f: (EXPECTED[f].get("revision", DEFAULT) != DEFAULT, f))
    verdicts = on_free_workers(workers, order, Worker.judge)
    report = table(verdicts)
    caught = sum(v.caught for v in verdicts)
    collateral = sum(len(v.failed - v.expected) for v in verdicts)
    summary = (f"fault score: {caught}/{len(verdicts)} faults caught by exactly their tests; "
               f"{collateral} collateral failure(s); {len(workers)} cluster(s); baseline {baseline.seconds:.0f}s, "
               f"total {time.monotonic() - started:.0f}s after start-up")
    show(capsys, f"\n{report}\n{summary}")

    problems = [f"{v.fault}: expected to be caught by {sorted(v.expected)}, failed {sorted(v.failed)}"
                for v in verdicts if not v.caught]
    stale = sorted({t for v in verdicts for t in v.expected} - known
                   - {t for v in verdicts for t in v.run.outcomes})
    if stale:
        problems.append(f"tests/fault_catches.yaml names tests the suite does not have: {stale}")
    assert not problems, "\n".join(problems) + f"\n\n{report}\n{summary}"
