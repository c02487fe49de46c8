"""Two Gateways of the class routing to one pool: one entry per Gateway (C8)."""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C8"), pytest.mark.features("SupportInferencePool")]


def test_two_gateways(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.create(topology.gateway("gateway-2"))
    topology.create(topology.route("route-2", "gateway-2", "pool"))
    topology.wait_pool_condition("Accepted", "True", "Accepted", gateway="gateway")
    pool = topology.wait_pool_condition("Accepted", "True", "Accepted", gateway="gateway-2")
    ours = [p for p in conditions.pool_parents(pool)
            if any(topology.revision.names_gateway(p.get("parentRef") or {}, g, topology.namespace)
                   for g in ("gateway", "gateway-2"))]
    assert len(ours) == 2, f"expected exactly one entry per Gateway, got {len(ours)}: {ours}"
