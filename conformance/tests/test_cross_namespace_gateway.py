"""A Gateway in another namespace routing to the pool: the entry names the Gateway's namespace (C14).

Upstream's GIE suite puts every Gateway in a namespace of its own, apart from
the routes and pools; implementations must name such a Gateway with its
namespace, which a same-namespace topology never shows. Every API's parentRef
shape can name it, so this runs on v1alpha2 as well as v1.
"""

import pytest

pytestmark = [pytest.mark.rule("C14", "C1", "C2"), pytest.mark.features("SupportInferencePool")]


def test_cross_namespace_gateway(topology, gateway_namespace):
    topology.apply_file("pool-with-route.yaml", skip=("Gateway/gateway", "HTTPRoute/route"))
    topology.create(topology.gateway("gateway", namespace=gateway_namespace))
    topology.create(topology.route("route", "gateway", "pool", gateway_namespace=gateway_namespace))
    topology.wait_pool_condition("Accepted", "True", "Accepted", gateway_namespace=gateway_namespace)
