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
from conformance.traffic.tier import Traffic
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
