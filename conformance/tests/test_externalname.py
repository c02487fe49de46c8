"""An ExternalName Service as endpoint picker is never accepted: ResolvedRefs False, InvalidExtensionRef (X1)."""

import pytest

pytestmark = [pytest.mark.rule("X1"), pytest.mark.features("SupportInferencePool")]


def test_externalname(topology):
    topology.apply_file("pool-with-route.yaml", skip=("Service/picker",))
    topology.create(topology.externalname_service())
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
