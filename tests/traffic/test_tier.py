"""One systemic problem does not cost every traffic test its whole wait: once Pods of an image never got
Ready (an image the cluster cannot pull or run), a later test's Pods of that image get a short grace and
fail with the first failure's line; Pods of other images still get the whole timeout.

Against a real control plane with no kubelet, where no Pod ever gets Ready."""

from __future__ import annotations

import uuid

import pytest

from conformance.options import DEFAULT_EPP_IMAGE, DEFAULT_MODEL_SERVER_IMAGE
from conformance.revisions import REVISIONS
from conformance.timeouts import TimeoutConfig
from conformance.topology import Topology
from conformance.traffic.tier import MODEL_SERVERS, PICKER, Traffic
from conformance.wait import WaitTimeout, wait_for

TIMEOUTS = TimeoutConfig(NamespacesMustBeReady=4, MaxTimeToConsistency=3)


def traffic_in_new_namespace(kube, unready: dict[str, str], image: str = DEFAULT_MODEL_SERVER_IMAGE) -> Traffic:
    ns = f"tier-{uuid.uuid4().hex[:6]}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_for(kube, "v1", "ServiceAccount", "default", ns, lambda o: o is not None, timeout=30,
             what="the default ServiceAccount", expected="it exists")
    topology = Topology(kube, ns, "unused", REVISIONS["seed"], TIMEOUTS)
    return Traffic(topology, {}, image, DEFAULT_EPP_IMAGE, unready_images=unready)


def test_an_image_whose_pods_never_got_ready_fails_the_next_test_at_once(kube):
    unready: dict[str, str] = {}
    first = traffic_in_new_namespace(kube, unready)
    first.deploy(only=["Pod/model-server-0"])
    with pytest.raises(WaitTimeout):
        first.ready_pods("model-server-0")
    assert set(unready) == {DEFAULT_MODEL_SERVER_IMAGE}

    second = traffic_in_new_namespace(kube, unready)
    second.deploy(only=["Pod/model-server-1"])
    with pytest.raises(AssertionError) as failed:
        second.ready_pods("model-server-1")
    assert not isinstance(failed.value, WaitTimeout)
    line = str(failed.value)
    assert line.startswith("Pod model-server-1 is not Ready within 1s either; Pods of image "
                           f"{DEFAULT_MODEL_SERVER_IMAGE} never got Ready in an earlier traffic test"), line

    other = traffic_in_new_namespace(kube, unready, image="example.com/another-model-server:v1")
    other.deploy(only=["Pod/model-server-2"])
    with pytest.raises(WaitTimeout):  # another image: the whole wait, and its own line
        other.ready_pods("model-server-2")
    assert set(unready) == {DEFAULT_MODEL_SERVER_IMAGE, "example.com/another-model-server:v1"}


def _mark_ready(kube, namespace: str, name: str, ip: str) -> None:
    """Write what a kubelet writes of a Ready Pod (this control plane has none)."""
    status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
              "conditions": [{"type": "Ready", "status": "True"}]}
    kube.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body={"status": status},
                 content_type="application/strategic-merge-patch+json")


def test_the_pools_pods_count_as_ready_only_once_its_endpoint_picker_is_too(kube):
    """A request sent before the picker serves is one the picker never saw (a FailOpen pool serves it from
    a Pod of the gateway's choosing), so the default wait includes the picker's Pod."""
    traffic = traffic_in_new_namespace(kube, {})
    traffic.deploy(only=[*(f"Pod/{name}" for name in MODEL_SERVERS), f"Pod/{PICKER}"])
    ips = {name: f"10.244.9.{i + 1}" for i, name in enumerate(MODEL_SERVERS)}
    for name, ip in ips.items():
        _mark_ready(kube, traffic.namespace, name, ip)
    assert traffic.ready_pods(*MODEL_SERVERS) == {ip: name for name, ip in ips.items()}
    with pytest.raises(WaitTimeout) as waited:
        traffic.ready_pods()
    assert f"waiting for Pod {PICKER}: " in waited.value.headline(), waited.value.headline()
    _mark_ready(kube, traffic.namespace, PICKER, "10.244.9.9")
    assert traffic.ready_pods() == {ip: name for name, ip in ips.items()}
