"""Run the conformance suite the way a user does, as a pytest subprocess, and read
what each test did from its JUnit XML. Shared by the meta-tests."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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

    def with_outcome(self, outcome: str) -> set[str]:
        """The ids of the tests with this outcome."""
        return {t for t, o in self.outcomes.items() if o == outcome}


def clean_env() -> dict[str, str]:
    """The environment without anything from the outer run (xdist, PYTEST_ADDOPTS, a KUBECONFIG)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "KUBECONFIG")) and k != "PYTHONBREAKPOINT"}


def junit_outcomes(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = FAILED
        elif case.find("skipped") is not None:
            outcome = SKIPPED
        else:
            outcome = PASSED
        test_id = f"{module}.py::{case.get('name')}"
        # A test that fails in its teardown is listed twice; the failure wins.
        if outcomes.get(test_id) != FAILED:
            outcomes[test_id] = outcome
    return outcomes


def run_suite(args: list[str], results_dir: Path, timeout: float = 900) -> SuiteRun:
    """Run `pytest args...` in the checkout; results (JUnit, Allure, HTML) go to `results_dir`."""
    done = subprocess.run([*PYTEST, f"--results-dir={results_dir}", *args],
                          cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)
    junit = results_dir / "junit.xml"  # the suite's default place for it
    outcomes = junit_outcomes(junit) if junit.exists() else {}
    return SuiteRun(done.returncode, outcomes, done.stdout + done.stderr)


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
        proc = subprocess.Popen([*PYTEST, f"--results-dir={results_dir}", *args], cwd=REPO, env=clean_env(),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
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
    """`count` embedded clusters, started side by side and stopped afterwards."""
    from conformance.cluster.embedded import EmbeddedCluster

    clusters = [EmbeddedCluster(crd_paths=list(crd_paths)) for _ in range(count)]
    try:
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda c: c.start(), clusters))
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
