"""The traffic tier's figures: its wall time in the suite, request latency through the data plane, and
runs in a row with nothing left behind.

    python bench/traffic.py [--runs 3] [--workers 3] [--requests 200] [--repeat 0]

1. Wall time of the traffic tests on the embedded default (`pytest -n 3 -k <the traffic tests>`, start
   to exit: the cluster, the data plane, the reference, the tests, the teardown), `--runs` times.
2. Latency of a steered request through the whole path (client -> bridge out of the sandbox -> Envoy ->
   ext_proc to upstream's EPP -> model server), `--requests` sequential POSTs: p50, p95.
3. `--repeat N`: N more runs of the traffic tests in a row; it counts failed runs (flakes), and after
   each run looks for what it left that was not there before it: processes of the data plane (Envoy,
   EPP, backends, bridges, the reference) and the suite's temporary directories (`ipc-*`).
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "bench"))

from _common import report, summary  # noqa: E402

# The traffic tests: the suite's test files that need the traffic feature.
TESTS = " or ".join(sorted(p.stem.removeprefix("test_") for p in (REPO / "conformance" / "tests").glob("test_*.py")
                           if "SupportInferencePoolTraffic" in p.read_text()))
LEFTOVER_PROCESSES = ("envoy", "epp-v", "conformance.traffic.backend", "conformance.traffic.sentinel", "bridge.py",
                      "reference_gateway")


def leftovers() -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(name in cmd for name in LEFTOVER_PROCESSES) and "bench/traffic.py" not in cmd:
            found.append(f"process {pid}: {cmd[:100]}")
    tmp = tempfile.gettempdir()
    found += [f"directory {d}" for d in glob.glob(f"{tmp}/ipc-*")]
    return found


def suite_run(workers: int) -> tuple[float, bool, list[str]]:
    with tempfile.TemporaryDirectory() as results:
        t = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", str(workers), "-k", TESTS,
                               f"--results-dir={results}"], cwd=REPO, capture_output=True, text=True)
        wall = time.monotonic() - t
        lines = done.stdout.strip().splitlines()
        failures = [line[:300] for line in lines if line.startswith(("FAILED", "ERROR"))] or lines[-1:]
        if done.returncode != 0:  # the whole output, to say why
            with tempfile.NamedTemporaryFile("w", prefix="traffic-failed-", suffix=".log", delete=False) as f:
                f.write(done.stdout + done.stderr)
            failures.append(f"whole output: {f.name}")
        return wall, done.returncode == 0, failures


def latency(n: int) -> list[float]:
    from kubernetes import config

    from conformance.cluster.embedded import EmbeddedCluster
    from conformance.kube import Kube
    from conformance.options import DEFAULT_EPP_IMAGE, DEFAULT_MODEL_SERVER_IMAGE
    from conformance.revisions import REVISIONS
    from conformance.traffic import client, manifests
    from conformance.traffic.embedded import DataPlane

    rev, ns, cls, ctl = REVISIONS["v1.6"], "bench-traffic", "bench", "inference-conformance.example/bench"
    with EmbeddedCluster(crd_paths=rev.embedded_crds) as cluster:
        kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        with DataPlane(cluster.server, cluster.kubeconfig, model_server_image=DEFAULT_MODEL_SERVER_IMAGE) as plane:
            argv = [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
                    "--controller-name", ctl, "--api-revision", rev.name, "--epp-tls",
                    "--envoy-config-dir", str(plane.envoy_dir),
                    *[a for address in plane.gateway_addresses for a in ("--gateway-address", address)]]
            reference = plane.start_implementation(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL)
            try:
                kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                             "metadata": {"name": cls}, "spec": {"controllerName": ctl}})
                kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                while not kube.get("v1", "ServiceAccount", "default", namespace=ns):
                    time.sleep(0.1)
                for doc in manifests.load("pool-with-picker.yaml", namespace=ns, gateway_class=cls, api=rev.api,
                                          model_server_image=DEFAULT_MODEL_SERVER_IMAGE, epp_image=DEFAULT_EPP_IMAGE):
                    kube.apply(doc)
                while not ((kube.get("gateway.networking.k8s.io/v1", "Gateway", "gateway", namespace=ns) or {})
                           .get("status") or {}).get("addresses"):
                    time.sleep(0.1)
                gw = kube.get("gateway.networking.k8s.io/v1", "Gateway", "gateway", namespace=ns)
                target = f"{gw['status']['addresses'][0]['value']}:80"
                pod = None
                while not (pod and pod.get("status", {}).get("podIP")):
                    pod = kube.get("v1", "Pod", "model-server-0", namespace=ns)
                    time.sleep(0.1)
                send = lambda: client.post(target, headers={client.SELECTION_HEADER: pod["status"]["podIP"]},  # noqa: E731
                                           via=plane.routes()[target])
                client.until_consistent(send, lambda a: None if a.status == 200 else "wanted 200", what="warm",
                                        timeout=60)
                times = []
                for _ in range(n):
                    t = time.monotonic()
                    answer = send()
                    times.append((time.monotonic() - t) * 1000)
                    assert answer.status == 200, answer.describe()
                return times
            finally:
                reference.terminate()
                reference.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (README command 1: 3)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=0, help="more runs in a row, counting flakes and leftovers")
    args = ap.parse_args()
    walls = []
    for _ in range(args.runs):
        wall, ok, why = suite_run(args.workers)
        if not ok:
            sys.exit("the traffic tests failed: " + "\n  ".join(why))
        walls.append(wall)
    ms = latency(args.requests)
    flakes, left, failures = 0, [], []
    for i in range(args.repeat):
        before = set(leftovers())  # what other jobs on the machine hold is not this run's
        _, ok, why = suite_run(args.workers)
        if not ok:
            flakes += 1
            failures += [f"run {i + 1}: {line}" for line in why]
            print(*failures[-len(why):], sep="\n", flush=True)
        left += sorted(set(leftovers()) - before)
    w, lat = summary(walls), summary(ms)
    rows = [(f"traffic tests, start to exit (pytest -n {args.workers})",
             f"p50 {w['p50']:.1f}s (min {w['min']:.1f}, max {w['max']:.1f}, {w['n']} runs)"),
            ("request through the data plane",
             f"p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms ({lat['n']} requests)")]
    if args.repeat:
        rows.append((f"{args.repeat} runs in a row", f"{flakes} failed; left behind: {len(left)} {left[:3]}"))
    report("traffic", rows, {"workers": args.workers, "wall": w, "latency_ms": lat, "repeat": args.repeat,
                             "flakes": flakes, "leftovers": left, "failures": failures})


if __name__ == "__main__":
    main()
