"""Entries written for Gateways of other controllers are left untouched (C10)."""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C10"), pytest.mark.features("SupportInferencePool")]


def test_foreign_parents(topology):
    topology.apply_file("pool-with-route.yaml")
    pool = topology.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs")
    # Another controller's entry, written the way a controller writes status.
    foreign = {"parentRef": topology.revision.gateway_parent_ref("gateway-of-another-controller", topology.namespace),
               "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "other",
                               "observedGeneration": pool["metadata"]["generation"],
                               "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    written = topology.add_pool_parents([foreign])
    stored_foreign = conditions.pool_parents(written)[-1]

    # Make the implementation write its own entry again, then look at the other one.
    topology.delete("Service", "picker")
    pool = topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
    others = [p for p in conditions.pool_parents(pool)
              if p.get("parentRef", {}).get("name") == "gateway-of-another-controller"]
    assert others == [stored_foreign], f"the other controller's entry changed: {others}, was {stored_foreign}"
