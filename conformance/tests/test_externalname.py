"""An ExternalName Service as endpoint picker is never accepted: ResolvedRefs False, InvalidExtensionRef (X1)."""

import pytest

pytestmark = [pytest.mark.rule("X1"), pytest.mark.features("SupportInferencePool")]


def test_externalname(topology):
    topology.apply_file("pool-with-route.yaml", skip=("Service/picker", "InferencePool/pool"))
    topology.create(topology.externalname_service())
    # The pool comes only once the implementation has the ExternalName Service in
    # view, so a False meaning "Service not found yet" cannot pass this test.
    topology.wait_services_seen()
    topology.create(topology.pool())
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
