"""Two Gateways, each with an HTTPRoute to a pool of its own: a request to each Gateway reaches its own
pool's Pods and never the other's (T6). Upstream: HTTPRouteMultipleGatewaysDifferentPools, which tells
the routes apart by hostname and path too; here both routes match every request, so only the Gateway
a request reaches can choose its pool."""

import pytest

pytestmark = [pytest.mark.rule("T6"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_gateways_to_pools(traffic):
    pools = traffic.two_pools("Gateway/gateway", "Gateway/secondary-gateway",
                              "HTTPRoute/to-primary", "HTTPRoute/to-secondary")
    for pool, gateway in (("primary", "gateway"), ("secondary", "secondary-gateway")):
        target = traffic.target(gateway)
        traffic.only_pool(pools, pool, target, "/", where=f"to Gateway {gateway}")
