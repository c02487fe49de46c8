"""Latency from a status write to the suite seeing it, and the status tier's wall time.

    python bench/status_latency.py [--writes 200]

An implementation's status write is played by this script: it PUTs a new
condition to /status while the suite's own `wait_for` watches for it, and
records the time from just before the write to the moment the wait returns.
"""

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import report, summary  # noqa: E402
from kubernetes import config  # noqa: E402

from conformance import conditions  # noqa: E402
from conformance.cluster.embedded import EmbeddedCluster  # noqa: E402
from conformance.kube import Kube  # noqa: E402
from conformance.revisions import REVISIONS  # noqa: E402
from conformance.wait import wait_for  # noqa: E402

POOL = "inference.networking.x-k8s.io/v1alpha2"


def latencies(kubeconfig: Path, writes: int) -> list[float]:
    watcher = Kube(config.new_client_from_config(config_file=str(kubeconfig)))
    writer = Kube(config.new_client_from_config(config_file=str(kubeconfig)))
    revision = REVISIONS["seed"]
    writer.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
    writer.create({"apiVersion": POOL, "kind": "InferencePool", "metadata": {"name": "pool", "namespace": "bench"},
                   "spec": {"selector": {}, "targetPortNumber": 8000, "extensionRef": {"name": "picker"}}})
    out = []
    for i in range(writes):
        reason = f"Step{i}"
        started: list[float] = []

        def write(reason: str = reason, started: list[float] = started) -> None:
            pool = writer.get(POOL, "InferencePool", "pool", "bench")
            pool["status"] = {"parent": [{
                "parentRef": revision.gateway_parent_ref("gateway", "bench"),
                "conditions": [{"type": "Accepted", "status": "True", "reason": reason, "message": "",
                                "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]}
            time.sleep(0.005)  # let the watch below be established first
            started.append(time.monotonic())
            writer.replace(pool, subresource="status")

        t = threading.Thread(target=write)
        t.start()
        wait_for(watcher, POOL, "InferencePool", "pool", "bench",
                 conditions.pool_condition(revision, "gateway", "bench", "Accepted", "True", reason),
                 timeout=10, what="pool", expected=reason)
        seen = time.monotonic()
        t.join()
        out.append((seen - started[0]) * 1000)
    return out


def tier() -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "conformance/tests",
                    "-k", "not test_schema and not test_status_subresource and not test_crd_drift"],
                   cwd=REPO, check=True, capture_output=True)
    return time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=200)
    args = ap.parse_args()
    with EmbeddedCluster(crd_paths=REVISIONS["seed"].embedded_crds) as c:
        ms = latencies(c.kubeconfig, args.writes)
    s = summary(ms)
    wall = tier()
    report("status_latency", [
        ("status write -> suite sees it (ms)",
         f"p50 {s['p50']:.1f}  p95 {s['p95']:.1f}  max {s['max']:.1f}  (n={s['n']})"),
        ("status tier with the reference implementation (s)", f"{wall:.1f}"),
    ], {"latency_ms": s, "status_tier_s": wall})


if __name__ == "__main__":
    main()
