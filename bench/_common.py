"""Shared bits of the benchmark scripts: percentiles, a table printer, the results file."""

import json
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict:
    return {"n": len(values), "min": min(values), "p50": statistics.median(values),
            "p95": percentile(values, 95), "max": max(values)}


def report(name: str, rows: list[tuple[str, str]], data: dict) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(data, indent=2))
    print(f"(JSON: {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out})", file=sys.stderr)
