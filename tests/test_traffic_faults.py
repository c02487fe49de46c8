"""The traffic tier catches every data-plane fault of the reference implementation with exactly
the tests named for it, and no conformant-but-unusual data plane fails it.

The status meta-test (test_fault_catching.py) runs the suite against clusters it starts itself,
with --kubeconfig: those run no Pods and no data plane, so the traffic tier is left out there. Here
each run is the suite on its embedded default, as an implementer runs it with their own controller:
`--implementation-command` starts the reference implementation, with one fault or behaviour on,
inside the suite's network sandbox, where it programs the suite's Envoy; it installs its own
GatewayClass (`--install-gateway-class`), and the suite waits for it. Only the traffic tests run, for
both APIs at once (the seed and v1.6, the embedded default: upstream's EPP reads either API's pools),
and a fault must be caught in each API where its tests apply (a T8 test is not-applicable on
v1alpha2, which has no appProtocol and one target port).

tests/fault_catches.yaml (`traffic:`) says which tests must fail for each fault; every other test
must pass. A baseline run with no fault must pass whole, and so must each benign entry (`benign:`)
with the default timeouts, showing that it acted: a behaviour of the implementation, or a condition of
the run (`environment:`, such as every endpoint picker answering late: conformance/traffic/delay.py).
Fault runs, and the baseline, get a shorter MaxTimeToConsistency (a fault makes a check wait it out).
Two runs at a time: each starts its own control plane, Envoy, upstream's EPP and model servers.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conformance.traffic import netns
from reference_gateway import behaviours, faults

from .suite_run import FAILED, PASSED, SKIPPED, SuiteRun, on_free_workers, run_suite, with_api

pytestmark = pytest.mark.skipif(bool(netns.available()), reason=netns.available() or "")

CATCHES = (yaml.safe_load((Path(__file__).parent / "fault_catches.yaml").read_text()) or {}).get("traffic") or {}
BENIGN: dict[str, dict] = {name: entry or {} for name, entry in (CATCHES.get("benign") or {}).items()}
EXPECTED: dict[str, dict] = {fault: entry for fault, entry in CATCHES.items() if fault != "benign"}
REPO = Path(__file__).resolve().parents[1]
REVISIONS = "seed,v1.6"  # one per API, both judged in every run
APIS = ("v1alpha2", "v1")
CLASS = "traffic-meta"
SLOTS = 2  # runs side by side
SLOW_SECONDS = 3  # slow-dataplane: well inside MaxTimeToConsistency (30 s)
FAULT_TIMEOUTS = "MaxTimeToConsistency:10"
# A benign entry with `environment` is a condition of the run, not a behaviour of the implementation.
ENVIRONMENTS: dict[str, dict[str, str]] = {name: e["environment"] for name, e in BENIGN.items() if "environment" in e}
WEIGHTED = with_api("test_weighted_pools.py::test_weighted_pools", "v1")


def _late_answers(verdict: Verdict) -> bool:
    # Every request waits for at least one answer of the picker: N requests, 10 at a time.
    from conformance.tests.test_weighted_pools import N

    delay = float(ENVIRONMENTS["slow-picker"]["IPC_EPP_DELAY"])
    return verdict.run.seconds.get(WEIGHTED, 0) >= N / 10 * delay


# What a benign run must show, so that a run that passes did exercise the behaviour: a line of the
# implementation's log, or what the run took.
EVIDENCE = {
    "slow-dataplane": ("a change taken up late",
                       lambda v: bool(re.search(r"taking the change up \d+s late", v.log))),
    "slow-picker": (f"{WEIGHTED} taking as long as its requests' late answers",
                    _late_answers),
}


def traffic_tests() -> list[str]:
    """The suite's traffic test files (they need the traffic feature)."""
    tests = REPO / "conformance" / "tests"
    return sorted(p.name for p in tests.glob("test_*.py") if "SupportInferencePoolTraffic" in p.read_text())


@dataclass(frozen=True)
class Job:
    fault: str = ""
    behaviour: str = ""

    @property
    def label(self) -> str:
        return f"benign {self.behaviour}" if self.behaviour else self.fault or "baseline"


@dataclass
class Verdict:
    job: Job
    run: SuiteRun
    seconds: float
    log: str

    @property
    def failed(self) -> set[str]:
        return self.run.with_outcome(FAILED)

    def _in_each_api(self, key: str) -> set[str]:
        """The fault's tests under `key`, in each API (a test not-applicable to an API catches nothing there)."""
        tests = EXPECTED[self.job.fault].get(key) or [] if self.job.fault else []
        return {with_api(t, api) for t in tests for api in APIS} - self.run.with_outcome(SKIPPED)

    @property
    def expected(self) -> set[str]:
        return self._in_each_api("caught_by")

    @property
    def tolerated(self) -> set[str]:
        """Tests the fault may fail as well, by chance (`may_fail`): each names why in the YAML."""
        return self._in_each_api("may_fail")

    @property
    def problem(self) -> str:
        """What is wrong with this run's verdict ("" when it is as it should be)."""
        if not self.run.outcomes:
            return f"the suite did not run (exit {self.run.returncode}):\n{self.run.output[-2000:]}"
        if self.job.fault:
            if not self.expected:
                return "none of the tests that must catch it ran (each was skipped)" + failures(self.run)
            if not self.expected <= self.failed <= self.expected | self.tolerated:
                return (f"expected to be caught by {sorted(self.expected)}, failed {sorted(self.failed)}"
                        + failures(self.run))
            return ""
        if self.run.returncode != 0 or self.failed:
            return f"a conformant data plane failed {sorted(self.failed)} (exit {self.run.returncode})" + failures(
                self.run)
        if self.job.behaviour in EVIDENCE:
            what, shown = EVIDENCE[self.job.behaviour]
            if not shown(self):
                return f"passed, but shows no {what}: the behaviour was not exercised"
        return ""


def failures(run: SuiteRun) -> str:
    lines = [line for line in run.output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return ("\n  " + "\n  ".join(lines[:8])) if lines else ""


def judge(slot: Path, job: Job) -> Verdict:
    results = slot / job.label.replace(" ", "-")
    results.mkdir()
    log = results / "implementation.log"
    command = [sys.executable, "-m", "reference_gateway", "--kubeconfig", "{kubeconfig}",
               "--gateway-class", CLASS, "--install-gateway-class", "--api-revision", "{api_revision}",
               "--envoy-config-dir", "{envoy_config_dir}", "--gateway-address", "{gateway_addresses}", "--epp-tls",
               "--log-file", str(log)]
    if job.fault:
        command += ["--fault", job.fault]
    if job.behaviour and job.behaviour not in ENVIRONMENTS:
        command += ["--behaviour", job.behaviour, "--slow-seconds", str(SLOW_SECONDS)]
    args = [*(f"conformance/tests/{t}" for t in traffic_tests()), "--api-revision", REVISIONS, "--gateway-class", CLASS,
            "--implementation-command", " ".join(command), "-p", "no:allure_pytest"]
    if not job.behaviour:
        args += ["--timeout-config-overrides", FAULT_TIMEOUTS]
    started = time.monotonic()
    run = run_suite(args, results, timeout=600, env=ENVIRONMENTS.get(job.behaviour))
    return Verdict(job, run, time.monotonic() - started, log.read_text(errors="replace") if log.exists() else "")


def jobs() -> list[Job]:
    """The baseline, every traffic fault and every traffic behaviour; the benign runs first (they take
    the default timeouts), then the faults that the most tests must catch."""
    out = [Job(behaviour=b) for b in BENIGN] + [Job()]
    return out + sorted((Job(fault=f) for f in EXPECTED), key=lambda j: (-len(EXPECTED[j.fault]["caught_by"]),
                                                                          j.fault))


def test_yaml_lists_every_traffic_fault_and_behaviour():
    assert sorted(EXPECTED) == sorted(faults.TRAFFIC), "fault_catches.yaml traffic: must list every data-plane fault"
    assert sorted(BENIGN.keys() - ENVIRONMENTS.keys()) == sorted(behaviours.TRAFFIC), (
        "fault_catches.yaml traffic: benign: must list every data-plane behaviour")
    assert all(name in EVIDENCE for name in BENIGN), "every benign run needs its EVIDENCE"
    tests = {t.removesuffix(".py") for t in traffic_tests()}
    for fault, entry in EXPECTED.items():
        assert set(entry) <= {"caught_by", "may_fail"} and entry["caught_by"], (
            f"{fault}: needs caught_by, may have may_fail, and nothing else")
        assert not set(entry["caught_by"]) & set(entry.get("may_fail") or []), f"{fault}: a test in both lists"
        unknown = {t.split(".py::")[0] for t in entry["caught_by"] + (entry.get("may_fail") or [])} - tests
        assert not unknown, f"{fault}: not traffic tests: {sorted(unknown)}"


def test_every_traffic_fault_is_caught_by_its_tests_alone(tmp_path, capsys):
    started = time.monotonic()
    slots = []
    for i in range(SLOTS):
        slots.append(tmp_path / f"slot-{i}")
        slots[-1].mkdir()
    verdicts = on_free_workers(slots, jobs(), judge)
    width = max(len(v.job.label) for v in verdicts)
    lines = [f"{'fault / behaviour':<{width}}  {'secs':>5}  verdict"]
    for v in verdicts:
        said = (", ".join(sorted(v.failed)) or "NOT CAUGHT") if v.job.fault else (
            "no failures" if not v.failed else "FAILED: " + ", ".join(sorted(v.failed)))
        if v.problem:
            said += "  | " + v.problem.splitlines()[0]
        lines.append(f"{v.job.label:<{width}}  {v.seconds:5.1f}  {said}")
    faulty = [v for v in verdicts if v.job.fault]
    caught = sum(not v.problem for v in faulty)
    collateral = sum(len(v.failed - v.expected - v.tolerated) for v in faulty)
    benign = [v for v in verdicts if not v.job.fault]
    summary = (f"traffic fault score: {caught}/{len(faulty)} caught by exactly their tests; {collateral} collateral "
               f"failure(s); conformant runs: {sum(not v.problem for v in benign)}/{len(benign)} passed whole "
               f"({time.monotonic() - started:.0f}s, {SLOTS} runs at a time)")
    with capsys.disabled():
        print("\n" + "\n".join(lines) + "\n" + summary)
    problems = [f"{v.job.label}: {v.problem}" for v in verdicts if v.problem]
    assert not problems, "\n".join(problems) + "\n\n" + "\n".join(lines)
    passed = {t for v in verdicts for t in v.run.with_outcome(PASSED)}
    assert passed, "no traffic test passed in any run"
