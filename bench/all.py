"""Every benchmark in turn, then one table of the headline figures (and bench/results/all.json).

    python bench/all.py [--quick]

`--quick` runs fewer rounds of each; the figures are noisier.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import RESULTS, report  # noqa: E402

SCRIPTS = {  # script -> (normal arguments, quick arguments)
    "controlplane": (["--runs", "5"], ["--runs", "2"]),
    "suite_wall": (["--runs", "3"], ["--runs", "1"]),
    "status_latency": (["--writes", "200"], ["--writes", "50"]),
    "schema_rate": (["--rounds", "5"], ["--rounds", "2"]),
    "peer_chainsaw": (["--runs", "3"], ["--runs", "1"]),
    "systemic": ([], []),
}


def headline(name: str, data: dict) -> list[tuple[str, str]]:
    if name == "controlplane":
        rss = sum(data["rss_mib"].values())
        return [("warm start to ready, p50 (s)", f"{data['warm_start_s']['p50']:.2f}"),
                ("control plane RSS (MiB)", f"{rss:.0f}")]
    if name == "suite_wall":
        return [(f"whole suite, -n {data['workers']}, p50 (s)", f"{data['wall_s']['p50']:.1f}")]
    if name == "status_latency":
        return [("status detection latency p50 / p95 (ms)",
                 f"{data['latency_ms']['p50']:.1f} / {data['latency_ms']['p95']:.1f}")]
    if name == "schema_rate":
        best = max(data["rate"].items(), key=lambda kv: kv[1])
        return [("schema cases/s (best)", f"{best[1]:.0f} with {best[0]} connection(s)")]
    if name == "peer_chainsaw":
        r = data["ratio"]
        return [("chainsaw / this suite, same work (x)",
                 f"sequential {r['1']:.2f}, two at a time {r['2']:.2f}")]
    if name == "systemic":
        return [(f"fault {data['fault']}: whole suite, default timeouts (s)", f"{data['fault_wall_s']:.0f}"),
                (f"slow implementation ({data['slow_seconds']:g} s per write): whole suite (s)",
                 f"{data['slow_wall_s']:.0f}, {len(data['slow_failed'])} failed")]
    return []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows, combined = [], {}
    for name, (normal, quick) in SCRIPTS.items():
        print(f"== {name}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else normal)])
        if done.returncode != 0:
            rows.append((name, f"FAILED (exit {done.returncode})"))
            continue
        combined[name] = json.loads((RESULTS / f"{name}.json").read_text())
        rows += headline(name, combined[name])
    print()
    report("all", rows, combined)


if __name__ == "__main__":
    main()
