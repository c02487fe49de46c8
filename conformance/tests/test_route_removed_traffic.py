"""Once the last route to a Gateway is gone, its requests get 404, never an answer from the pool (T7).
Upstream: InferencePoolResolvedRefsCondition, whose last step deletes the last HTTPRoute and expects 404
after a fixed sleep; here the 404s must come, three in a row, within MaxTimeToConsistency."""

import pytest

pytestmark = [pytest.mark.rule("T7"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_route_removed_traffic(traffic):
    traffic.deploy()
    target, pods = traffic.target(), traffic.ready_pods()
    ip = next(iter(pods))
    traffic.consistently(traffic.send(target, pick=ip), lambda a: None if a.status == 200 else "wanted 200",
                         what="T7: a request steered to a Pod, the route in place")
    traffic.topology.delete("HTTPRoute", "route")
    traffic.consistently(traffic.send(target, pick=ip),
                         lambda a: None if a.status == 404 and not a.pod else "wanted 404: the Gateway has no route",
                         what="T7: requests after the last HTTPRoute was deleted")
