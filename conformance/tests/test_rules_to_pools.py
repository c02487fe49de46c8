"""Two rules of one HTTPRoute to two pools, each with its own picker: a request on each rule's path
reaches its own pool's Pods and never the other's (T6). Upstream: HTTPRouteMultipleRulesDifferentPools,
which sends unsteered requests on /primary and /secondary; here each Pod is also steered to, on both
paths, and 30 requests naming every Pod of both pools must stay in the path's pool."""

import pytest

pytestmark = [pytest.mark.rule("T6"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_rules_to_pools(traffic):
    pools = traffic.two_pools("Gateway/gateway", "HTTPRoute/rules")
    target = traffic.target()
    for pool in pools:  # HTTPRoute rules: /primary -> pool primary, /secondary -> pool secondary
        traffic.only_pool(pools, pool, target, f"/{pool}", where=f"to /{pool}")
