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
    # The Service `picker` exists and the implementation has seen it: only the
    # kind or group can make the reference invalid.
    topology.wait_services_seen()
    topology.create(topology.pool(**ref))
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
