"""The gateway reports back which endpoint served: the test endpoint picker copies it into
x-conformance-test-served-endpoint, which names the picked Pod's IP:port (T2).
Upstream: GatewayDestinationEndpointServed."""

import pytest

pytestmark = [pytest.mark.rule("T2", "T1"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_served_endpoint(traffic):
    traffic.deploy()
    target, pods = traffic.target(), traffic.ready_pods()
    for ip, name in pods.items():
        endpoint = f"{ip}:3000"
        traffic.consistently(
            traffic.send(target, pick=ip),
            lambda a, name=name, endpoint=endpoint: None if (a.status, a.pod, a.served) == (200, name, endpoint)
            else f"wanted 200 from {name} with x-conformance-test-served-endpoint: {endpoint}, got {a.served!r}",
            what=f"the served endpoint of a request steered to {name}")
