"""A pool no route points at gets no entry (C12).

The placeholder parent a revision's status default puts there (kind Status,
name default) is nobody's entry, so it may stay.
"""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C12"), pytest.mark.features("SupportInferencePool")]


def test_no_route(topology):
    topology.apply_file("pool-with-route.yaml", skip=("HTTPRoute/route",))
    # A second pool with a route: once it has its entry, the implementation has
    # had the unrouted pool in view too.
    topology.create(topology.pool("routed"))
    topology.create(topology.route("route", "gateway", "routed"))
    topology.wait_pool_condition("Accepted", "True", "Accepted", pool="routed")
    pool = topology.get_pool("pool")
    entry = conditions.pool_parent(pool, topology.revision, "gateway", topology.namespace)
    assert entry is None, f"the unrouted pool has an entry for the Gateway: {entry}"
    # Nothing else in this namespace reports on pools: any other entry is the implementation's too.
    others = [p for p in conditions.pool_parents(pool) if not topology.revision.is_default_parent(p)]
    assert others == [], f"the unrouted pool has entries: {others}"
