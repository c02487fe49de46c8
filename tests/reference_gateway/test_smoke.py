"""The reference gateway against a real (embedded) control plane, run as its own process.

Uses the `cluster` and `kube` fixtures of tests/conftest.py (seed CRDs and Gateway API's).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.wait import wait_for
from reference_gateway.model import DEFAULT_CONTROLLER, KINDS

ROOT = Path(__file__).resolve().parents[2]
NS = "smoke"
TIMEOUT = 30
POOL = KINDS["InferencePool"]


def _die_with_parent() -> None:
    # If the test process is killed outright, the controller goes with it.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@pytest.fixture
def implementation(cluster, tmp_path):
    log = tmp_path / "reference-gateway.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
             "--controller-name", DEFAULT_CONTROLLER],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent)
    try:
        yield log
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        print(log.read_text(errors="replace"))  # shown by pytest when the test fails
    assert code == 0, f"the implementation did not exit cleanly on SIGTERM (exit code {code})"


def entry(pool: dict | None, gateway: str) -> dict | None:
    for e in ((pool or {}).get("status") or {}).get("parent") or []:
        if e["parentRef"].get("kind") == "Gateway" and e["parentRef"].get("name") == gateway:
            return e
    return None


def cond(e: dict | None, type_: str) -> tuple[str, str] | None:
    c = next((c for c in (e or {}).get("conditions") or [] if c["type"] == type_), None)
    return (c["status"], c["reason"]) if c else None


def test_pool_status_follows_its_extension_service(kube, implementation):
    gw_api = KINDS["Gateway"]
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kube.create({"apiVersion": gw_api, "kind": "GatewayClass", "metadata": {"name": "smoke"},
                 "spec": {"controllerName": DEFAULT_CONTROLLER}})
    kube.create({"apiVersion": gw_api, "kind": "Gateway", "metadata": {"name": "gw", "namespace": NS},
                 "spec": {"gatewayClassName": "smoke",
                          "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
    kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "epp", "namespace": NS},
                 "spec": {"selector": {"app": "epp"}, "ports": [{"port": 9002}]}})
    kube.create({"apiVersion": POOL, "kind": "InferencePool", "metadata": {"name": "pool", "namespace": NS},
                 "spec": {"selector": {"app": "model"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}}})
    kube.create({"apiVersion": gw_api, "kind": "HTTPRoute", "metadata": {"name": "route", "namespace": NS},
                 "spec": {"parentRefs": [{"name": "gw"}],
                          "rules": [{"backendRefs": [{"group": "inference.networking.x-k8s.io",
                                                      "kind": "InferencePool", "name": "pool", "port": 8000}]}]}})

    pool = wait_for(kube, POOL, "InferencePool", "pool", NS,
                    lambda p: cond(entry(p, "gw"), "Accepted") == ("True", "Accepted")
                    and cond(entry(p, "gw"), "ResolvedRefs") == ("True", "ResolvedRefs"),
                    timeout=TIMEOUT, what="the pool's entry for Gateway gw",
                    expected="Accepted True/Accepted and ResolvedRefs True/ResolvedRefs")
    assert entry(pool, "gw")["parentRef"] == {"apiVersion": gw_api, "kind": "Gateway", "name": "gw",
                                              "namespace": NS}
    accepted_at = next(c for c in entry(pool, "gw")["conditions"] if c["type"] == "Accepted")["lastTransitionTime"]

    wait_for(kube, gw_api, "HTTPRoute", "route", NS,
             lambda r: any(p.get("controllerName") == DEFAULT_CONTROLLER
                           and cond(p, "Accepted") == ("True", "Accepted")
                           and cond(p, "ResolvedRefs") == ("True", "ResolvedRefs")
                           for p in ((r or {}).get("status") or {}).get("parents") or []),
             timeout=TIMEOUT, what="the route's status", expected="Accepted and ResolvedRefs True")
    gw = wait_for(kube, gw_api, "Gateway", "gw", NS,
                  lambda g: cond((g or {}).get("status"), "Programmed") == ("False", "Pending"),
                  timeout=TIMEOUT, what="the Gateway's status", expected="Programmed False (no data plane)")
    assert cond(gw["status"], "Accepted") == ("True", "Accepted")

    kube.delete("v1", "Service", "epp", NS)
    pool = wait_for(kube, POOL, "InferencePool", "pool", NS,
                    lambda p: cond(entry(p, "gw"), "ResolvedRefs") == ("False", "InvalidExtensionRef"),
                    timeout=TIMEOUT, what="the pool's entry for Gateway gw",
                    expected="ResolvedRefs False/InvalidExtensionRef once the Service is gone")
    still = next(c for c in entry(pool, "gw")["conditions"] if c["type"] == "Accepted")
    assert (still["status"], still["lastTransitionTime"]) == ("True", accepted_at)
    assert "wrote InferencePool smoke/pool" in implementation.read_text()
