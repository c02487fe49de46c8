"""Wall time of the whole suite on the embedded default, the way the README runs it.

    python bench/suite_wall.py [--runs 3] [--workers 2]

Each run is `pytest -n WORKERS` in the checkout: it starts its own control
plane(s) and the reference implementation, runs every test, writes the reports
and tears everything down. The time is the process's, start to exit.
"""

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import report, summary  # noqa: E402


def one_run(workers: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as results:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--results-dir={results}"]
        if workers > 1:
            argv += ["-n", str(workers)]
        t = time.monotonic()
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        elapsed = time.monotonic() - t
        if done.returncode != 0:
            sys.exit(f"the suite failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        suite = ET.parse(Path(results) / "junit.xml").getroot().find("testsuite")
        counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    return elapsed, counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    times, counts = [], {}
    for _ in range(args.runs):
        elapsed, counts = one_run(args.workers)
        times.append(elapsed)
    s = summary(times)
    rows = [(f"whole suite, pytest -n {args.workers} (s)",
             f"p50 {s['p50']:.1f}  min {s['min']:.1f}  max {s['max']:.1f}  (n={s['n']})"),
            ("tests", f"{counts['tests']} ({counts['skipped']} not applicable to the revision)")]
    report("suite_wall", rows, {"workers": args.workers, "wall_s": s, "junit": counts})


if __name__ == "__main__":
    main()
