"""When the only route from a Gateway goes, that Gateway's entry goes too; when the last
route to the pool goes, no entry is left (C9).

After the last route, GIE's own conformance suite (v0.4.0 on) demands an empty
status.parent; under a revision with a status default the lone placeholder is
read as conformant too (docs/revisions.md).
"""

import pytest

pytestmark = [pytest.mark.rule("C9"), pytest.mark.features("SupportInferencePool")]


def test_route_removed(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.create(topology.gateway("gateway-2"))
    topology.create(topology.route("route-2", "gateway-2", "pool"))
    topology.wait_pool_condition("Accepted", "True", "Accepted", gateway="gateway-2")
    topology.delete("HTTPRoute", "route-2")
    topology.wait_no_pool_parent(gateway="gateway-2")
    # The other Gateway still routes to the pool: its entry stays.
    topology.wait_pool_condition("Accepted", "True", "Accepted", gateway="gateway")
    topology.delete("HTTPRoute", "route")
    topology.wait_no_implementation_entry()
