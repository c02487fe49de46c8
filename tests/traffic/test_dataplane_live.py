"""The embedded data plane end to end: upstream's EPP (v1.4.0, conformance plugins), a real Envoy
programmed by the reference gateway, model servers run by the kubelet stand-in, all inside one sandbox,
driven through the traffic topology (manifests/traffic/pool-with-picker.yaml) and sent requests as the
traffic rules send them.

What it proves is what the traffic tests of the suite will stand on: a steered request is served by the
picked Pod, also 100 at a time (T1), the test EPP names the endpoint the gateway says served (T2), with
the EPP gone FailClose refuses (T3) and FailOpen still serves from the pool (T4).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube
from conformance.options import DEFAULT_EPP_IMAGE, DEFAULT_MODEL_SERVER_IMAGE
from conformance.revisions import REVISIONS
from conformance.traffic import client, manifests, netns
from conformance.traffic.embedded import DataPlane

pytestmark = [pytest.mark.skipif(bool(netns.available()), reason=netns.available() or ""), pytest.mark.slow]

REVISION = REVISIONS["v1.6"]
CLASS, CONTROLLER = "traffic-reference", "inference-conformance.example/traffic-reference"
NS = "traffic-live"
TIMEOUT = 60


def wait(check, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.1)
    return found


@pytest.fixture(scope="module")
def live():
    with EmbeddedCluster(crd_paths=REVISION.embedded_crds) as cluster:
        kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        with DataPlane(cluster.server, cluster.kubeconfig, model_server_image=DEFAULT_MODEL_SERVER_IMAGE) as plane:
            argv = [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
                    "--controller-name", CONTROLLER, "--api-revision", REVISION.name, "--epp-tls",
                    "--envoy-config-dir", str(plane.envoy_dir),
                    *[a for address in plane.gateway_addresses for a in ("--gateway-address", address)]]
            log = open(plane.dir / "reference.log", "wb")  # noqa: SIM115 - closed below
            reference = plane.start_implementation(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                   stderr=subprocess.STDOUT)
            try:
                kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                             "metadata": {"name": CLASS}, "spec": {"controllerName": CONTROLLER}})
                kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
                wait(lambda: _exists(kube, "v1", "ServiceAccount", "default", NS), "the default ServiceAccount")
                for doc in manifests.load("pool-with-picker.yaml", namespace=NS, gateway_class=CLASS,
                                          api=REVISION.api, model_server_image=DEFAULT_MODEL_SERVER_IMAGE,
                                          epp_image=DEFAULT_EPP_IMAGE):
                    kube.apply(doc)
                yield kube, plane
            finally:
                reference.terminate()
                reference.wait(10)
                log.close()
                if plane.kubelet and plane.kubelet.errors:
                    print("kubelet:", *plane.kubelet.errors, sep="\n  ")


def _exists(kube: Kube, api_version: str, kind: str, name: str, ns: str):
    return kube.get(api_version, kind, name, namespace=ns)


def gateway_target(kube: Kube) -> str:
    def address():
        gw = _exists(kube, "gateway.networking.k8s.io/v1", "Gateway", "gateway", NS) or {}
        addrs = (gw.get("status") or {}).get("addresses") or []
        return addrs[0]["value"] if addrs else None
    return f"{wait(address, 'the Gateway address')}:80"


def ready_pods(kube: Kube) -> dict[str, str]:
    """pod IP -> name of the Ready model servers."""
    def ready():
        pods = kube.list("v1", "Pod", namespace=NS, label_selector="app=model-server")["items"]
        out = {p["status"]["podIP"]: p["metadata"]["name"] for p in pods
               if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}
        return out if len(out) == 3 else None
    return wait(ready, "three Ready model servers")


def test_requests_follow_the_picker_and_fail_as_the_pool_says(live):
    kube, plane = live
    target = gateway_target(kube)
    pods = ready_pods(kube)

    def steered(ip):
        return lambda: client.post(target, path="/v1/completions", headers={client.SELECTION_HEADER: ip},
                                   via=plane.routes()[target])

    # T1 + T2: each Pod, picked, serves; the test EPP names the endpoint the gateway says served.
    for ip, name in pods.items():
        client.until_consistent(
            steered(ip), lambda a, name=name, ip=ip: None if a.status == 200 and a.pod == name
            and a.served == f"{ip}:3000" else f"wanted 200 from {name} ({ip}:3000)", what=f"steer to {name}",
            timeout=TIMEOUT)
    ip, name = next(iter(pods.items()))
    answers = client.many(steered(ip), n=100, concurrency=10)
    wrong = [a.describe() for a in answers if a.status != 200 or a.pod != name]
    assert not wrong, f"{len(wrong)} of 100 not served by {name}: {wrong[:3]}"

    # T3: FailClose (the default) with the EPP gone: refused, never forwarded.
    kube.delete("v1", "Pod", "endpoint-picker", namespace=NS)
    client.until_consistent(steered(ip), lambda a: None if a.status >= 500 and not a.pod else "wanted a 5xx",
                            what="FailClose without its EPP", timeout=TIMEOUT)

    # T4: FailOpen with the EPP gone: served by a Pod of the pool.
    kube.patch(f"{REVISION.api.group}/{REVISION.api.version}", "InferencePool", "pool",
               {"spec": {"endpointPickerRef": {"failureMode": "FailOpen"}}}, namespace=NS)
    client.until_consistent(steered(ip), lambda a: None if a.status == 200 and a.pod in pods.values()
                            else "wanted 200 from a Pod of the pool", what="FailOpen without its EPP", timeout=TIMEOUT)
