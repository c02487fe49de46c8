"""Run the conformance suite the way a user does, as a pytest subprocess, and read
what each test did from its JUnit XML. Shared by the meta-tests.

Loaded into such a run (`-p tests.suite_run`, with ORDER_ENV naming a JSON file), this module is
also a small pytest plugin that narrows the run to some of the suite's modules and puts some schema
cases first: the CRD mutant meta-test uses it to stop (-x) at the first failure after a few tests.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
SUITE_LABEL = "app.kubernetes.io/managed-by=inferencepool-conformance"  # on everything the suite creates
W, T, R = TypeVar("W"), TypeVar("T"), TypeVar("R")


def with_api(test_id: str, api: str) -> str:
    """A test id as the suite names it when it runs for `api`: `test_x.py::test_y[p]` -> `...[api-p]`."""
    if test_id.endswith("]"):
        head, _, param = test_id.partition("[")
        return f"{head}[{api}-{param}"
    return f"{test_id}[{api}]"


@dataclass
class SuiteRun:
    returncode: int
    outcomes: dict[str, str]  # test id under conformance/tests/ ("test_x.py::test_y[api-p]") -> outcome
    output: str
    seconds: dict[str, float] = field(default_factory=dict)  # test id -> its time in the JUnit XML

    def with_outcome(self, outcome: str) -> set[str]:
        """The ids of the tests with this outcome."""
        return {t for t, o in self.outcomes.items() if o == outcome}


def clean_env() -> dict[str, str]:
    """The environment without anything from the outer run (xdist, PYTEST_ADDOPTS, a KUBECONFIG)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "KUBECONFIG")) and k != "PYTHONBREAKPOINT"}


def _test_id(case: ET.Element) -> str:
    return f"{case.get('classname', '').rsplit('.', 1)[-1]}.py::{case.get('name')}"


def junit_seconds(path: Path) -> dict[str, float]:
    return {_test_id(case): float(case.get("time") or 0) for case in ET.parse(path).getroot().iter("testcase")}


def junit_outcomes(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = FAILED
        elif case.find("skipped") is not None:
            outcome = SKIPPED
        else:
            outcome = PASSED
        test_id = _test_id(case)
        # A test that fails in its teardown is listed twice; the failure wins.
        if outcomes.get(test_id) != FAILED:
            outcomes[test_id] = outcome
    return outcomes


def without_traffic(args: list[str]) -> list[str]:
    """With --kubeconfig, `args` and --skip-traffic: the clusters the meta-tests start run no Pods (no
    kubelet), so the traffic tier could only wait for them to be Ready."""
    if any(a.startswith("--kubeconfig") for a in args) and "--skip-traffic" not in args:
        return [*args, "--skip-traffic"]
    return list(args)


def run_suite(args: list[str], results_dir: Path, timeout: float = 900, env: dict[str, str] | None = None) -> SuiteRun:
    """Run `pytest args...` in the checkout (`env`: more environment); results (JUnit, Allure, HTML) go to
    `results_dir`.

    With --kubeconfig the traffic tier is left out (--skip-traffic): the clusters these tests start run no
    Pods and no data plane unless the suite hosts them (the embedded default, tests/traffic/)."""
    done = subprocess.run([*PYTEST, f"--results-dir={results_dir}", *without_traffic(args)],
                          cwd=REPO, env={**clean_env(), **(env or {})}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    junit = results_dir / "junit.xml"  # the suite's default place for it
    if not junit.exists():
        return SuiteRun(done.returncode, {}, done.stdout + done.stderr)
    return SuiteRun(done.returncode, junit_outcomes(junit), done.stdout + done.stderr, junit_seconds(junit))


def start_reference(kubeconfig: Path, log: Path, revision: str, faults: list[str] = (),
                    behaviours: list[str] = (), extra_args: list[str] = ()) -> subprocess.Popen:
    """Start the reference implementation against `kubeconfig`, as its user would; stop it with `stop`.

    `faults` and `behaviours` switch on deliberate mistakes (`--fault`) and benign
    behaviours (`--behaviour`); `extra_args` go on its command line as they are."""
    from conformance.features import REFERENCE_CONTROLLER

    argv = [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(kubeconfig),
            "--controller-name", REFERENCE_CONTROLLER, "--api-revision", revision]
    for fault in faults:
        argv += ["--fault", fault]
    for behaviour in behaviours:
        argv += ["--behaviour", behaviour]
    argv += list(extra_args)
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def reference_gateway_class(kube) -> None:
    """Create the GatewayClass the reference implementation answers to."""
    from conformance.features import REFERENCE_CONTROLLER, REFERENCE_GATEWAY_CLASS

    kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                 "metadata": {"name": REFERENCE_GATEWAY_CLASS}, "spec": {"controllerName": REFERENCE_CONTROLLER}})


def spawn_suite(args: list[str], results_dir: Path) -> tuple[subprocess.Popen, Path]:
    """Start `pytest args...` without waiting; (the process, the file its output goes to)."""
    out_path = results_dir / "output.txt"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([*PYTEST, f"--results-dir={results_dir}", *without_traffic(args)], cwd=REPO,
                                env=clean_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    return proc, out_path


def finished(proc: subprocess.Popen, out_path: Path, results_dir: Path, timeout: float) -> SuiteRun:
    """Wait for a spawned suite to end (killing it after `timeout` seconds, which fails the caller)."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the suite was still running after {timeout:.0f}s:\n"
                             + out_path.read_text(errors="replace")[-3000:]) from None
    junit = results_dir / "junit.xml"
    return SuiteRun(proc.returncode, junit_outcomes(junit) if junit.exists() else {},
                    out_path.read_text(errors="replace"))


@contextmanager
def started_clusters(count: int, crd_paths: list[Path]) -> Iterator[list]:
    """`count` embedded clusters, started one after the other and stopped afterwards.

    Not side by side: the meta-tests start theirs at the same moment (CI starts them first), and
    several API servers booting at once on two busy cores can keep one from answering its
    controller manager within the controller manager's 10 s (it then exits). A control plane that
    fails to start is started again, once, as a new one: that says nothing about what the
    meta-tests judge."""
    from conformance.cluster.embedded import ClusterError, EmbeddedCluster

    clusters = []
    try:
        for _ in range(count):
            for attempt in (1, 2):
                cluster = EmbeddedCluster(crd_paths=list(crd_paths))
                try:
                    cluster.start()
                except ClusterError:  # start() has stopped it
                    if attempt == 2:
                        raise
                    continue
                clusters.append(cluster)
                break
        yield clusters
    finally:
        for c in clusters:
            c.stop()


def on_free_workers(workers: list[W], items: list[T], work: Callable[[W, T], R]) -> list[R]:
    """`work(worker, item)` for every item, each worker taking the next item when it is free
    (one item at a time per worker); the results in the items' order."""
    free: queue.SimpleQueue = queue.SimpleQueue()
    for w in workers:
        free.put(w)

    def one(item: T) -> R:
        w = free.get()
        try:
            return work(w, item)
        finally:
            free.put(w)

    pool = ThreadPoolExecutor(len(workers))
    try:
        return list(pool.map(one, items))
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure, start nothing more


def show(capsys, text: str) -> None:
    """Print a meta-test's table past pytest's capture (under xdist it shows in the worker's report: -rP)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        print(text)
    else:
        with capsys.disabled():
            print(text)


# -- the plugin (-p tests.suite_run) ----------------------------------------------------

ORDER_ENV = "IPC_META_ORDER"  # names a JSON file: {"modules": [file names], "first": [schema case names]}


def ordered(where: Path, modules: list[str], first: list[str]) -> dict[str, str]:
    """The environment entry that makes a run with `-p tests.suite_run` keep only the tests of
    `modules` and run the schema cases named in `first` (every via of each) before the rest, in
    that order; the JSON file it names is written to `where`."""
    where.write_text(json.dumps({"modules": modules, "first": first}))
    return {ORDER_ENV: str(where)}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get(ORDER_ENV)
    if not path:
        return
    want = json.loads(Path(path).read_text())
    modules = set(want.get("modules") or [])
    if modules:
        dropped = [i for i in items if i.path.name not in modules]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i.path.name in modules]
    rank = {name: n for n, name in enumerate(want.get("first") or [])}

    def key(item: pytest.Item) -> int:
        sending = getattr(getattr(item, "callspec", None), "params", {}).get("sending")  # a schema test's case
        return rank.get(getattr(sending, "name", None), len(rank))

    items.sort(key=key)  # stable: each case's vias, and everything not named, keep the suite's order
