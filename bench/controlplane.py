"""Warm start-to-ready of the embedded cluster, by phase, and the memory of its processes.

    python bench/controlplane.py [--runs 5] [--cold]

"Ready" is what the suite waits for: /readyz, the default ServiceAccount and
the CRDs Established. "Warm" means the binary is built and the etcd data
template of a bootstrapped cluster with these CRDs exists (the first start
makes it); each start still gets fresh credentials, ports and processes.
--cold also builds kcp with empty Go caches (minutes).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import report, summary  # noqa: E402

from conformance.cluster import binary, embedded  # noqa: E402
from conformance.revisions import REVISIONS  # noqa: E402


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def timed_start() -> tuple[float, dict, dict]:
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    orig_wait = embedded.EmbeddedCluster._wait

    def wait(self, deadline, what, ready):
        orig_wait(self, deadline, what, ready)
        marks[what] = time.monotonic() - t0

    embedded.EmbeddedCluster._wait = wait
    try:
        c = embedded.EmbeddedCluster(crd_paths=REVISIONS["seed"].embedded_crds)
        c.start()
        total = time.monotonic() - t0
        mem = {p.name: rss_kib(p.popen.pid) for p in c._procs}
        c.stop()
    finally:
        embedded.EmbeddedCluster._wait = orig_wait
    return total, marks, mem


def cold_build() -> float:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "GOCACHE": f"{d}/build", "GOMODCACHE": f"{d}/mod", "XDG_CACHE_HOME": f"{d}/xdg"}
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "conformance", "build"], env=env, check=True,
                       cwd=Path(__file__).resolve().parents[1])
        elapsed = time.monotonic() - t
        subprocess.run(["chmod", "-R", "u+w", d])  # the module cache is read-only
        return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    binary.ensure()
    timed_start()  # first start warms the page cache
    totals, phases, mems = [], {}, []
    for _ in range(args.runs):
        total, marks, mem = timed_start()
        totals.append(total)
        mems.append(mem)
        for k, v in marks.items():
            phases.setdefault(k, []).append(v)
    s = summary(totals)
    rows = [("warm start to ready (s)", f"p50 {s['p50']:.2f}  min {s['min']:.2f}  max {s['max']:.2f}  (n={s['n']})")]
    rows += [(f"  reached: {k} (s)", f"p50 {summary(v)['p50']:.2f}") for k, v in phases.items()]
    last = mems[-1]
    rows += [(f"RSS {name} (MiB)", f"{kib / 1024:.0f}") for name, kib in last.items()]
    rows.append(("RSS total (MiB)", f"{sum(last.values()) / 1024:.0f}"))
    data = {"warm_start_s": s, "phases_p50_s": {k: summary(v)["p50"] for k, v in phases.items()},
            "rss_mib": {k: v / 1024 for k, v in last.items()}, "binary": str(binary.cached_path())}
    if args.cold:
        data["cold_build_s"] = cold_build()
        rows.append(("cold build (s)", f"{data['cold_build_s']:.0f}"))
    report("controlplane", rows, data)


if __name__ == "__main__":
    main()
