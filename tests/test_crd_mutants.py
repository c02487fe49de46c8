"""The schema tier judges the API, not our CRD: every loosened CRD must fail it.

For each mutant of a generated InferencePool CRD (tests/crd_mutants.py): the
seed's (v1alpha2) and the newest GA revision's (v1.6; its cases are those of
manifests/schema/v1/, its mutants include the CEL rules and property counts),
the mutant is installed on an embedded cluster and the schema tier is run
against it the way a user runs it on their own cluster, as a pytest
subprocess with --kubeconfig. A mutant is killed when that run exits 1 (a
test failed). Every mutant must be killed, except the equivalent ones that
crd_mutants.EQUIVALENT names with the reason no request can observe them;
those must survive, and the ones in crd_mutants.REFUSED must be refused by
the API server, so that both lists stay true.

Mutants cannot run concurrently on one cluster (each replaces the same CRD),
so concurrency means more clusters: WORKERS clusters, each working through
the mutants one at a time. Two clusters beat one on two cores: a single
stream of runs keeps about one core busy, because the pytest process and the
API server take turns (request, answer); a second stream fills the other core
for the price of a second control plane's start-up (about 8 s). Measured on a
busy two-core machine: 6m53s with one cluster, 5m17s with two.

What a run costs, and why it is the run it is. A mutant's run stops at the
first failure (-x), so it runs the schema cases that write, expect or reject a
value where the mutant changed the CRD first (crd_mutants.first_cases) and the
rest of the tier after them: a killed mutant costs a few tests instead of up to
the whole tier, and one that none of those cases kills (an equivalent one) still
meets every test of the tier. Only the order changes, never the tests: each
schema test is independent of the others (its own object, dry-run or in a
namespace of its own). The run names the whole suite and is narrowed to the
tier by the plugin of tests/suite_run.py, not by naming the tier's files: a run
that names part of the suite collects the whole suite a second time, in a child
process, to list the tests it left out, which cost about a second of CPU per
mutant. Allure is off (-p no:allure_pytest): the verdict is the exit code and
the first failure, and Allure's files per test cost about as much again.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance import schema_cases
from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube
from conformance.revisions import GATEWAY_API_CRDS, REVISIONS

from . import crd_mutants
from .crd_swap import install
from .suite_run import REPO, clean_env, on_free_workers, ordered, show, started_clusters

# The newest revision of each API: between them they have every kind of validation the CRDs carry.
JUDGED = ("seed", "v1.6")
# The tier that judges the API by requests. test_crd_drift.py is left out on purpose: it compares
# the installed CRD with the revision's file, so it would kill every mutant (the equivalent ones
# too) and hide the ones no request tells apart. test_crd_drift_unit.py checks it against these
# mutants without a cluster.
TIER = ["test_schema.py", "test_status_subresource.py"]  # modules of conformance/tests/
RUN_TIMEOUT = 600.0
WORKERS = 2

KILLED, SURVIVED, REFUSED = "killed", "SURVIVED", "refused"


@dataclass
class Outcome:
    status: str  # KILLED, SURVIVED or REFUSED
    detail: str  # the first failing test, or why the CRD was refused
    seconds: float



# -- running the schema tier ------------------------------------------------------

# pytest's short summary: "FAILED <node id> - <message>", or "ERROR <node id> ..." for a fixture.
_FIRST_FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)", re.M)


def run_tier(kubeconfig: Path, results_dir: Path, revision: str, first: list[str]) -> tuple[int, str, str]:
    """Run the schema tier as a user would, the cases named in `first` first: (exit code, first
    failing test or "", output).

    Its JUnit XML and HTML page go to `results_dir`, not into the checkout's reports/out/.
    """
    argv = [sys.executable, "-m", "pytest", "conformance/tests", "-x", "-q", "-p", "no:cacheprovider",
            "-p", "no:allure_pytest", "-p", "tests.suite_run",
            f"--kubeconfig={kubeconfig}", "--allow-crds-mismatch", "--api-revision", revision,
            # Keep the namespaces: the cluster is thrown away anyway, and waiting for
            # each run's namespaces to finish terminating would double its time.
            "--cleanup-test-resources=false", "--cleanup-base-resources=false",
            f"--results-dir={results_dir}"]
    env = {**clean_env(), **ordered(results_dir / "order.json", TIER, first)}
    done = subprocess.run(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    found = _FIRST_FAILURE.search(done.stdout)
    name = ""
    if found:
        name = found.group(2).removeprefix("conformance/tests/")
        name = f"ERROR {name}" if found.group(1) == "ERROR" else name
    return done.returncode, name, done.stdout + done.stderr


def judge(kube: Kube, kubeconfig: Path, crd: dict, results_base: Path, revision: str,
          first: list[str] = ()) -> Outcome:
    started = time.monotonic()
    refusal = install(kube, crd)
    if refusal is not None:
        causes = "; ".join(f"{c.get('field')}: {c.get('message')}" for c in refusal.causes)
        return Outcome(REFUSED, f"HTTP {refusal.status}: {causes or refusal.body.get('message', '')}",
                       time.monotonic() - started)
    results_dir = Path(tempfile.mkdtemp(prefix="run-", dir=results_base))
    code, failed, output = run_tier(kubeconfig, results_dir, revision, list(first))
    if code in (0, 1):
        shutil.rmtree(results_dir, ignore_errors=True)  # a few MB per run; the table says what matters
    if code == 0:
        return Outcome(SURVIVED, "", time.monotonic() - started)
    if code == 1:
        return Outcome(KILLED, failed or "(no FAILED line)", time.monotonic() - started)
    tail = "\n".join(output.strip().splitlines()[-30:])
    pytest.fail(f"the schema tier could not run (exit {code}), which says nothing about the mutant "
                f"(its results: {results_dir}):\n{tail}", pytrace=False)


def _said(name: str, o: Outcome) -> str:
    if o.status == KILLED:
        return o.detail
    if o.status == REFUSED:
        return f"refused: {o.detail}"
    reason = crd_mutants.EQUIVALENT.get(name)
    return f"SURVIVED (equivalent: {reason})" if reason else "SURVIVED"


def table(rows: list[tuple[str, Outcome]]) -> str:
    """mutant -> the first test that caught it (or SURVIVED / refused), with seconds per mutant."""
    width = max(len(name) for name, _ in rows)
    lines = [f"{'mutant':<{width}}  {'secs':>5}  first failing test"]
    lines += [f"{name:<{width}}  {o.seconds:5.1f}  {_said(name, o)}" for name, o in rows]
    return "\n".join(lines)


# -- the test ---------------------------------------------------------------------


@dataclass
class Worker:
    cluster: EmbeddedCluster
    kube: Kube
    results: Path  # where the schema tier's runs on this cluster write their results

    def judge(self, crd: dict, revision: str, first: list[str] = ()) -> Outcome:
        return judge(self.kube, self.cluster.kubeconfig, crd, self.results, revision, first)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """WORKERS clusters with the Gateway API CRDs only; the InferencePool CRD is installed per mutant."""
    with started_clusters(WORKERS, [GATEWAY_API_CRDS]) as clusters:
        yield [Worker(c, Kube(config.new_client_from_config(config_file=str(c.kubeconfig))),
                      tmp_path_factory.mktemp(f"mutant-runs-{i}")) for i, c in enumerate(clusters)]


def test_the_lists_name_only_mutants_that_exist():
    """EQUIVALENT and REFUSED name mutants of some revision's CRD (they hold both APIs' names)."""
    names = {m.name for r in REVISIONS.values() for m in crd_mutants.mutants(yaml.safe_load(r.crd.read_text()))}
    stale = sorted((set(crd_mutants.EQUIVALENT) | set(crd_mutants.REFUSED)) - names)
    assert not stale, f"crd_mutants lists mutants no CRD yields any more: {stale}"


@pytest.mark.parametrize("revision", JUDGED)
def test_every_loosened_crd_fails_the_schema_tier(workers, capsys, revision):
    started = time.monotonic()
    crd = yaml.safe_load(REVISIONS[revision].crd.read_text())
    mutants = list(crd_mutants.mutants(crd))
    equivalent = crd_mutants.applies(crd_mutants.EQUIVALENT, crd)
    refused = crd_mutants.applies(crd_mutants.REFUSED, crd)

    # The unmutated CRD must pass, or every "kill" below would mean nothing.
    baseline = workers[0].judge(crd, revision)
    assert baseline.status == SURVIVED, f"the schema tier fails on the generated CRD itself: {baseline}"

    cases = [c for c in schema_cases.load_all()[1] if c.expectation(REVISIONS[revision]) is not None]
    verdicts = on_free_workers(workers, mutants,
                               lambda w, m: w.judge(m.crd, revision, crd_mutants.first_cases(m, cases)))
    rows = list(zip([m.name for m in mutants], verdicts, strict=True))
    report = table(rows)
    expected = len(mutants) - len(equivalent) - len(refused)
    killed = sum(o.status == KILLED for _, o in rows)
    summary = (f"mutation score ({revision}): {killed}/{expected} non-equivalent mutants killed "
               f"({len(mutants)} mutants, {len(equivalent)} equivalent, "
               f"{len(refused)} refused by the API server; {len(workers)} cluster(s); "
               f"baseline {baseline.seconds:.1f}s, total {time.monotonic() - started:.0f}s after start-up)")
    show(capsys, f"\n{report}\n{summary}")

    problems = []
    for name, o in rows:
        if name in equivalent:
            if o.status != SURVIVED:
                problems.append(f"{name}: listed as equivalent, but {o.status} ({o.detail}): remove it from EQUIVALENT")
        elif name in refused:
            if o.status != REFUSED:
                problems.append(f"{name}: listed as refused, but the API server installed it and it was {o.status}")
        elif o.status != KILLED:
            problems.append(f"{name}: {o.status} {o.detail}".rstrip()
                            + (": add a schema case that tells it apart" if o.status == SURVIVED else ""))
    assert not problems, "\n".join(problems) + f"\n\n{report}\n{summary}"
