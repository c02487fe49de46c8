"""An extensionRef of a kind or group the API does not support: ResolvedRefs False, InvalidExtensionRef (C7)."""

import pytest

pytestmark = [pytest.mark.rule("C7"), pytest.mark.features("SupportInferencePool")]


@pytest.mark.parametrize("ref", [
    pytest.param({"kind": "ConfigMap"}, id="core-kind-not-service"),
    pytest.param({"group": "inference.example.com", "kind": "Service"}, id="service-of-another-group"),
    pytest.param({"group": "inference.example.com", "kind": "EndpointPicker"}, id="custom-kind"),
])
def test_extension_ref_unsupported(topology, ref):
    topology.apply_file("pool-with-route.yaml", skip=("InferencePool/pool",))
    # The Service `picker` exists: only the kind or group makes the reference invalid.
    pool = topology.kube.apply({
        "apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool",
        "metadata": {"name": "pool", "namespace": topology.namespace},
        "spec": {"selector": {"app": "model-server"}, "targetPortNumber": 8000,
                 "extensionRef": {"name": "picker", **ref}}})
    assert pool["spec"]["extensionRef"]["name"] == "picker"
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
