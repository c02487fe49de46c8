"""An extensionRef to a Service that does not exist: ResolvedRefs False, InvalidExtensionRef (C5)."""

import pytest

pytestmark = [pytest.mark.rule("C5"), pytest.mark.features("SupportInferencePool")]


def test_extension_ref_missing_service(topology):
    topology.apply_file("pool-with-route.yaml", skip=("Service/picker",))
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
