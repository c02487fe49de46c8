"""Schema cases per second against the embedded cluster, and the schema tier's wall time.

    python bench/schema_rate.py [--rounds 5] [--threads 1,4,8]

The rate is measured on the dry-run cases of manifests/schema/ (what most of
the tier is), sent by the suite's own harness; the tier's wall time is a
`pytest` run of test_schema.py and test_status_subresource.py, cluster start
included, with and without xdist.
"""

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import report  # noqa: E402
from kubernetes import config  # noqa: E402

from conformance import schema_cases  # noqa: E402
from conformance.cluster.embedded import EmbeddedCluster  # noqa: E402
from conformance.kube import Kube  # noqa: E402
from conformance.revisions import REVISIONS  # noqa: E402


def rate(kubeconfig: Path, threads: int, rounds: int) -> tuple[float, int]:
    bases, cases = schema_cases.load("v1alpha2")
    dry = [c for c in cases if c.target == "spec" and "dry-run" in c.via]
    revision = REVISIONS["seed"]
    kubes = [Kube(config.new_client_from_config(config_file=str(kubeconfig))) for _ in range(threads)]
    work = [c for _ in range(rounds) for c in dry]

    def run(i: int) -> None:
        for case in work[i::threads]:
            schema_cases.run_spec_case(kubes[i], bases, case, "dry-run", revision, "bench")

    for case in dry:  # warm-up: connections, the apiserver's schema caches
        schema_cases.run_spec_case(kubes[0], bases, case, "dry-run", revision, "bench")
    t = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, range(threads)))
    return len(work) / (time.monotonic() - t), len(work)


def tier(extra: list[str]) -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                    "conformance/tests/test_schema.py", "conformance/tests/test_status_subresource.py"],
                   cwd=REPO, check=True, capture_output=True)
    return time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,4,8")
    args = ap.parse_args()
    rows, data = [], {"rate": {}}
    with EmbeddedCluster(crd_paths=REVISIONS["seed"].embedded_crds) as c:
        Kube(config.new_client_from_config(config_file=str(c.kubeconfig))).create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
        for n in (int(x) for x in args.threads.split(",")):
            r, count = rate(c.kubeconfig, n, args.rounds)
            data["rate"][n] = r
            rows.append((f"dry-run cases/s, {n} connection(s)", f"{r:.0f}  ({count} cases)"))
    data["tier_serial_s"] = tier([])
    data["tier_xdist2_s"] = tier(["-n", "2"])
    rows += [("schema+defaulting tier, 1 process (s)", f"{data['tier_serial_s']:.1f}"),
             ("schema+defaulting tier, -n 2 (s)", f"{data['tier_xdist2_s']:.1f}")]
    report("schema_rate", rows, data)


if __name__ == "__main__":
    main()
