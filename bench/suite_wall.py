"""Wall time of the whole suite on the embedded default, the way the README runs it.

    python bench/suite_wall.py [--runs 3] [--workers 3] [-- PYTEST_ARGS...]

Each run is `pytest -n WORKERS` in the checkout (`--workers 1`: plain `pytest`,
one process): it starts its own control plane and the reference
implementation, runs every test, writes the reports and tears everything
down. The time is the process's, start to exit. Where it goes is split by the
tests' own start and stop times (from the run's Allure results): from the
start to the first test (interpreters, collection, the cluster and the
implementation starting), the tests, and from the last test to the exit
(reports, teardown). The CPU time is that of every process the run started
(the control plane's included), user and system.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import report, summary  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(workers: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as results:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--results-dir={results}", *extra]
        if workers > 1:
            argv += ["-n", str(workers)]
        cpu = _children_cpu()
        started, t = time.time(), time.monotonic()
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        elapsed = time.monotonic() - t
        cpu = _children_cpu() - cpu
        if done.returncode != 0:
            sys.exit(f"the suite failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        suite = ET.parse(Path(results) / "junit.xml").getroot().find("testsuite")
        counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
        tests = [json.loads(p.read_text()) for p in (Path(results) / "allure-results").glob("*-result.json")]
        first = min(r["start"] for r in tests) / 1000 - started
        last = max(r["stop"] for r in tests) / 1000 - started
    return {"wall": elapsed, "cpu": cpu, "to_first_test": first, "tests": last - first,
            "after_last_test": elapsed - last, "junit": counts}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (README command 1: 3)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()
    runs = [one_run(args.workers, args.pytest_args) for _ in range(args.runs)]
    s = {key: summary([r[key] for r in runs]) for key in ("wall", "cpu", "to_first_test", "tests", "after_last_test")}
    counts = runs[-1]["junit"]
    how = f"pytest -n {args.workers}" if args.workers > 1 else "pytest (one process)"

    def row(key: str) -> str:
        return f"p50 {s[key]['p50']:.1f}  min {s[key]['min']:.1f}  max {s[key]['max']:.1f}  (n={s[key]['n']})"

    rows = [(f"whole suite, {how} (s)", row("wall")),
            ("  start to first test (s)", row("to_first_test")),
            ("  first test to last (s)", row("tests")),
            ("  last test to exit (s)", row("after_last_test")),
            ("CPU time, all processes (s)", row("cpu")),
            ("tests", f"{counts['tests']} ({counts['skipped']} skipped: not applicable to the revision, or not "
                      "supported)")]
    report("suite_wall", rows, {"workers": args.workers, "pytest_args": args.pytest_args,
                                "wall_s": s["wall"], "cpu_s": s["cpu"], "to_first_test_s": s["to_first_test"],
                                "tests_s": s["tests"], "after_last_test_s": s["after_last_test"], "junit": counts})


if __name__ == "__main__":
    main()
