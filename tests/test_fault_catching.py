"""The suite catches a wrong implementation, and blames the right tests.

For each deliberate mistake in reference_gateway/faults.py, the reference
implementation is started with only that mistake switched on, and the whole
conformance suite is run against it the way an implementer runs it on their
own cluster: a pytest subprocess with --kubeconfig and --gateway-class. The
tests that tests/fault_catches.yaml names for the fault must fail, and every
other test must pass (or be not-applicable): a fault caught by the wrong test
is a collateral failure and counts against the suite. A baseline run with no
fault must pass whole.

Every run judges both APIs at once, as on a cluster of GIE v1.0 - v1.4: the
worker clusters have the v1alpha2 CRD (seed, or v0.5 for the faults and
behaviours that need its placeholder parent) and the GA API's newest, and the
reference implementation speaks both. A fault must be caught by its tests in
each API it applies to (`apis:` in fault_catches.yaml, default both).

The other way round, each benign behaviour of reference_gateway/behaviours.py
(conformant, only unusual: writing status on every pool at once, answering 30 s
late, other condition orders, extra condition types, rewriting often) gets a
whole-suite run that must have no failure at all: a test that fails there
fails a conformant implementation. These runs use the suite's default
timeouts, as an implementer would, so the slow behaviour's 30 s must fit
within them. tests/fault_catches.yaml lists the behaviours under `benign:`, and
under `benign_together:` groups of them that get one run with the whole group on:
a real controller shows several such traits at once.

Runs share control planes: each of WORKERS clusters takes the next run when
it is free, the longest first (the slow behaviour, then the faults most tests
catch), so that no long run starts last. Between runs the implementation is
stopped, and nothing of the previous run may be left: the suite deletes its
namespaces and waits for them to go, and the objects of the kinds the suite
creates are compared before and after every run (a run that leaves something
behind, or removes something, fails the test whatever its verdict).

What a run costs, and why it is the run it is. The API server's side of a
whole-suite run (creating and deleting about a hundred namespaces, each swept
by the namespace controller) is the same whatever the meta-test does; what it
chooses is the rest:
- one pytest process per run (-p no:xdist), not two workers: a faulty run
  mostly waits out short timeouts (10 s per wait, against the upstream 300 s)
  and settle windows, which cost no CPU, and concurrency comes from more
  clusters instead; two workers cost a controller, a second worker and a
  second collection of the whole suite (the controller lists the tests it
  did not collect itself), about 5 s of CPU per run. Only the slow behaviour,
  whose every status test waits 30 s or more, runs with several workers
  (`workers:` in fault_catches.yaml).
- Allure off (-p no:allure_pytest): the verdicts are read from the JUnit XML,
  and Allure's files per test are a second report of the same outcomes (about
  2 s of CPU per run). Nothing a test does depends on it: its evidence is
  attached only when a listener is there.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.kube import ApiError, Kube
from conformance.revisions import APIS, DEFAULT, GATEWAY_API_CRDS, REVISIONS
from reference_gateway import behaviours, faults

from .crd_swap import install
from .suite_run import (
    FAILED,
    SKIPPED,
    SuiteRun,
    on_free_workers,
    reference_gateway_class,
    run_suite,
    show,
    start_reference,
    started_clusters,
    stop,
    with_api,
)

CATCHES = yaml.safe_load((Path(__file__).parent / "fault_catches.yaml").read_text())
BENIGN: dict[str, dict] = {name: entry or {} for name, entry in (CATCHES.get("benign") or {}).items()}
# Behaviours a real controller may well show at once: one benign run with all of each group on.
TOGETHER: list[list[str]] = CATCHES.get("benign_together") or []
EXPECTED: dict[str, dict] = {fault: entry for fault, entry in CATCHES.items()
                             if fault not in ("benign", "benign_together", "traffic")}
# The data plane's faults and behaviours are judged by tests/test_traffic_faults.py (`traffic:` in the file).
FAULTS = sorted(set(faults.FAULTS) - faults.TRAFFIC)
BEHAVIOURS = sorted(set(behaviours.BEHAVIOURS) - behaviours.TRAFFIC)
WORKERS = 5  # a faulty run mostly waits: five single-process runs side by side keep two cores busy
GA = "v1.6"  # the GA API's revision every run judges beside the v1alpha2 one
# The reference implementation answers in milliseconds; a fault that makes it never
# answer should cost seconds, not the upstream five minutes per test.
TIMEOUTS = ";".join(f"{name}:10" for name in (
    "InferencePoolMustHaveCondition", "InferencePoolMustNotHaveParent", "HTTPRouteMustHaveCondition",
    "RouteMustHaveParents", "HTTPRouteMustNotHaveParents", "GatewayMustHaveCondition"))


# What a benign run's implementation log must show, so that a run that passes
# did exercise the behaviour (a switch that does nothing would pass vacuously).
def _first_pool_write_without_entry(log: str) -> bool:
    """A pool whose first status write has no entry: written for being there, not for a route."""
    first: dict[str, str] = {}
    for pool, summary in re.findall(r"wrote InferencePool (\S+) status (\S+)", log):
        first.setdefault(pool, summary)
    return "parent=none" in first.values()


EVIDENCE = {
    "eager-writer": ("pool whose first status write has no entry", _first_pool_write_without_entry),
    "slow": ("status write 30 s or more after its event",
             lambda log: re.search(r"\((?:[3-9]\d|\d{3,})\d{3}\.\d ms after the event", log) is not None),
    "frequent-rewrites": ("round of rewrites that reached an object",
                          lambda log: re.search(r"rewrite round \d+: [1-9]", log) is not None),
    "lagging-cache": ("change that reached the cache late",
                      lambda log: re.search(r"changes reach the cache \d+\.\d+s late", log) is not None),
    "no-placeholder-restore": ("pool left with an empty status.parent",
                               lambda log: re.search(r"wrote InferencePool \S+ status parent=none", log) is not None),
}


@dataclass(frozen=True)
class Job:
    """One whole-suite run: a fault, a benign behaviour (or several at once, `a+b`), or neither (the
    baseline)."""

    fault: str = ""
    behaviour: str = ""
    revision: str = DEFAULT

    @property
    def behaviours(self) -> list[str]:
        return self.behaviour.split("+") if self.behaviour else []

    @property
    def name(self) -> str:
        return self.fault or self.behaviour or "baseline"

    @property
    def label(self) -> str:
        return f"benign {self.behaviour}" if self.behaviour else self.name


@dataclass
class Verdict:
    job: Job
    run: SuiteRun
    seconds: float
    results: Path | None = None  # kept when a benign run failed
    missing_evidence: str = ""  # for a benign run: what its log should have shown and did not
    left_behind: list = field(default_factory=list)  # objects of KINDS after the run that were not there before
    removed: list = field(default_factory=list)  # and the other way round

    @property
    def fault(self) -> str:
        return self.job.fault

    @property
    def revision(self) -> str:
        return self.job.revision

    @property
    def failed(self) -> set[str]:
        """The failed tests, each with its API (`test_x.py::test_y[v1-p]`)."""
        return {t for t, o in self.run.outcomes.items() if o == FAILED}

    @property
    def expected(self) -> set[str]:
        if not self.fault:
            return set()
        entry = EXPECTED[self.fault]
        # A test that does not apply to an API (not-applicable there) cannot catch anything in it.
        return {with_api(t, api) for t in entry["caught_by"] for api in entry.get("apis", APIS)} - \
            self.run.with_outcome(SKIPPED)

    @property
    def caught(self) -> bool:
        return bool(self.failed) and self.failed == self.expected

    @property
    def clean(self) -> bool:
        """A benign (or baseline) run: the suite passed whole."""
        return self.run.returncode == 0 and not self.failed and not self.missing_evidence


# Everything a run may create, and so must have deleted by its end: (apiVersion, kind).
KINDS = [("v1", "Namespace"), ("v1", "Service"), ("v1", "Pod"),
         ("gateway.networking.k8s.io/v1", "Gateway"), ("gateway.networking.k8s.io/v1", "HTTPRoute"),
         ("gateway.networking.k8s.io/v1", "GatewayClass"),
         *((api.api_version, "InferencePool") for api in APIS.values())]


def inventory(kube: Kube) -> set[tuple[str, str, str, str]]:
    """(kind, namespace, name, uid) of every object of KINDS, in all namespaces (an API whose CRD is
    not installed has none)."""
    out = set()
    for api_version, kind in KINDS:
        try:
            items = kube.list(api_version, kind, None)["items"]
        except ApiError as e:
            if e.status != 404:
                raise
            items = []
        out |= {(kind, o["metadata"].get("namespace", ""), o["metadata"]["name"], o["metadata"]["uid"])
                for o in items}
    return out


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

    def judge(self, job: Job) -> Verdict:
        started = time.monotonic()
        self.use_revision(job.revision)
        before = inventory(self.kube)
        tag = f"{job.name}-{job.revision}"
        log = self.results / f"implementation-{tag}.log"
        implementation = start_reference(self.cluster.kubeconfig, log, job.revision,
                                         [job.fault] if job.fault else [], job.behaviours,
                                         ["--api-revision", GA])
        results = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=self.results))
        # One process, or more workers when the behaviour makes every test wait (they wait, they do
        # not compute), handed out one test at a time (in chunks, the status tests bunch up).
        workers = BENIGN.get(job.behaviour, {}).get("workers")
        args = ["-n", str(workers), "--maxschedchunk=1"] if workers else ["-p", "no:xdist"]
        args += ["-p", "no:allure_pytest"]
        if not job.behaviour:
            # A fault run, or the baseline that gives its catches their meaning: short timeouts.
            args += ["--timeout-config-overrides", TIMEOUTS]
        try:
            run = run_suite([f"--kubeconfig={self.cluster.kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS,
                             *args], results, timeout=BENIGN_RUN_TIMEOUT if job.behaviour else 900)
        finally:
            stop(implementation)
        if run.returncode not in (0, 1) or not run.outcomes:
            tail = "\n".join(run.output.strip().splitlines()[-30:])
            pytest.fail(f"the suite could not run with {job.label} (exit {run.returncode}), "
                        f"which says nothing about it (results: {results}):\n{tail}", pytrace=False)
        verdict = Verdict(job, run, time.monotonic() - started, results)
        after = inventory(self.kube)
        verdict.left_behind, verdict.removed = sorted(after - before), sorted(before - after)
        text = log.read_text(errors="replace")
        unseen = [what for what, shown in (EVIDENCE[b] for b in job.behaviours if b in EVIDENCE) if not shown(text)]
        if unseen:
            verdict.missing_evidence = f"its log ({log}) shows no {' and no '.join(unseen)}"
        if not job.behaviour or verdict.clean:
            shutil.rmtree(results, ignore_errors=True)
            verdict.results = None
        return verdict


BENIGN_RUN_TIMEOUT = 1800  # a benign run that fails waits out the default timeouts


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """WORKERS clusters with the default revision's CRDs and the reference GatewayClass."""
    with started_clusters(WORKERS, [REVISIONS[DEFAULT].crd, REVISIONS[GA].crd, GATEWAY_API_CRDS]) as clusters:
        workers = []
        for i, c in enumerate(clusters):
            kube = Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))
            reference_gateway_class(kube)
            workers.append(Worker(c, kube, tmp_path_factory.mktemp(f"fault-runs-{i}")))
        yield workers


def table(verdicts: list[Verdict]) -> str:
    """fault -> the tests that caught it, and any the fault should not have touched;
    benign behaviour -> its failures (there should be none)."""
    header = "fault / behaviour"
    width = max(len(header), *(len(v.job.label) for v in verdicts))
    lines = [f"{header:<{width}}  {'rev':<4}  {'secs':>5}  caught by"]
    for v in verdicts:
        if v.job.behaviour:
            said = "no failures" if not v.failed else "COLLATERAL: " + ", ".join(sorted(v.failed))
            if v.missing_evidence:
                said += f"  | NOT EXERCISED: {v.missing_evidence}"
        else:
            said = ", ".join(sorted(v.failed & v.expected)) or "NOT CAUGHT"
            if v.failed - v.expected:
                said += "  | COLLATERAL: " + ", ".join(sorted(v.failed - v.expected))
            if v.expected - v.failed:
                said += "  | MISSED: " + ", ".join(sorted(v.expected - v.failed))
        lines.append(f"{v.job.label:<{width}}  {v.revision:<4}  {v.seconds:5.1f}  {said}")
    return "\n".join(lines)


def failure_lines(results: Path) -> str:
    """The first line of each failure in a run's JUnit XML."""
    import xml.etree.ElementTree as ET

    lines = []
    for case in ET.parse(results / "junit.xml").getroot().iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                first = (node.get("message") or "").strip().splitlines()[:1]
                lines.append(f"  {case.get('name')}: {first[0] if first else tag}")
                break
    return "\n".join(lines)


def jobs() -> list[Job]:
    """The baseline, every fault and every benign run, the longest first: the runs with more pytest
    workers (every test waits), then the faults by how many tests must catch them (each failing test
    waits out a timeout or a settle window), then the rest. A cluster swaps its v1alpha2 CRD when the
    next run needs another revision (a second or so)."""
    out = [Job()]
    out += [Job(fault=f, revision=EXPECTED[f].get("revision", DEFAULT)) for f in FAULTS]
    out += [Job(behaviour=b, revision=r) for b, entry in BENIGN.items() for r in entry.get("revisions", [DEFAULT])]
    out += [Job(behaviour="+".join(group)) for group in TOGETHER]

    def waits(job: Job) -> int:
        if not job.fault:
            return 0
        entry = EXPECTED[job.fault]
        return len(entry["caught_by"]) * len(entry.get("apis", APIS))

    return sorted(out, key=lambda j: (-BENIGN.get(j.behaviour, {}).get("workers", 0), -waits(j), j.name, j.revision))


def test_every_fault_is_caught_by_its_tests_alone(workers, capsys):
    started = time.monotonic()
    assert sorted(EXPECTED) == sorted(FAULTS), "tests/fault_catches.yaml must list every status fault, and only those"
    for fault, entry in EXPECTED.items():
        unknown = set(entry) - {"revision", "caught_by", "apis"}
        assert set(entry.get("apis", APIS)) <= set(APIS), f"{fault}: unknown API in apis"
        assert not unknown and entry.get("caught_by"), f"{fault}: needs caught_by, and nothing else but revision"
    assert sorted(BENIGN) == sorted(BEHAVIOURS), (
        "the benign: section of tests/fault_catches.yaml must list every status behaviour, and only those")
    for behaviour, entry in BENIGN.items():
        unknown = set(entry) - {"revisions", "workers"}
        assert not unknown, f"benign {behaviour}: only revisions and workers may be given, not {sorted(unknown)}"
        assert set(entry.get("revisions", [DEFAULT])) <= set(REVISIONS), f"benign {behaviour}: unknown revision"
    for group in TOGETHER:
        assert len(group) > 1 and set(group) <= set(BEHAVIOURS), (
            f"benign_together {group}: two or more of the status behaviours")

    everything = on_free_workers(workers, jobs(), Worker.judge)
    baseline = next(v for v in everything if v.job == Job())
    known = set(baseline.run.outcomes)
    verdicts = [v for v in everything if v is not baseline]
    faulty = [v for v in verdicts if v.fault]
    benign = [v for v in verdicts if v.job.behaviour]
    report = table(verdicts)
    caught = sum(v.caught for v in faulty)
    collateral = sum(len(v.failed - v.expected) for v in faulty)
    clean = sum(v.clean for v in benign)
    summary = (f"fault score: {caught}/{len(faulty)} faults caught by exactly their tests; "
               f"{collateral} collateral failure(s)\n"
               f"benign: {clean}/{len(benign)} runs with zero failures "
               f"({len(BENIGN)} behaviours, {len(TOGETHER)} group(s) of them at once, "
               f"{sum(len(v.failed) for v in benign)} failure(s) in all)\n"
               f"{len(workers)} cluster(s); baseline {baseline.seconds:.0f}s, "
               f"total {time.monotonic() - started:.0f}s after start-up; "
               f"objects left behind: {sum(len(v.left_behind) for v in everything)}, "
               f"removed: {sum(len(v.removed) for v in everything)}")
    show(capsys, f"\n{report}\n{summary}")

    problems = []
    if baseline.run.returncode != 0 or baseline.failed:
        # The clean implementation must pass whole, or every "catch" would mean nothing.
        problems.append(f"the suite fails on the reference implementation with no fault (exit "
                        f"{baseline.run.returncode}): {sorted(baseline.failed)}\n" + baseline.run.output[-3000:])
    problems += [f"{v.fault}: expected to be caught by {sorted(v.expected)}, failed {sorted(v.failed)}"
                 for v in faulty if not v.caught]
    problems += [f"benign {v.job.behaviour} ({v.revision}): a conformant implementation failed "
                 f"{sorted(v.failed) or '(exit ' + str(v.run.returncode) + ')'}"
                 + (f"; {v.missing_evidence}" if v.missing_evidence else "")
                 + (f" (results: {v.results})\n" + failure_lines(v.results) if v.failed and v.results else "")
                 for v in benign if not v.clean]
    problems += [f"{v.job.label} ({v.revision}) changed the cluster: left behind {v.left_behind[:5]}, "
                 f"removed {v.removed[:5]}" for v in everything if v.left_behind or v.removed]
    stale = sorted({t for v in faulty for t in v.expected} - known
                   - {t for v in verdicts for t in v.run.outcomes})
    if stale:
        problems.append(f"tests/fault_catches.yaml names tests the suite does not have: {stale}")
    assert not problems, "\n".join(problems) + f"\n\n{report}\n{summary}"
