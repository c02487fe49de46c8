"""FailClose, the default: with the endpoint picker gone, requests are refused with a 5xx and never
reach a model server (T3)."""

import pytest

pytestmark = [pytest.mark.rule("T3"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_fail_close(traffic):
    traffic.deploy(failure_mode="FailClose")
    target, pods = traffic.target(), traffic.ready_pods()
    ip = next(iter(pods))
    traffic.consistently(traffic.send(target, pick=ip), lambda a: None if a.status == 200 else "wanted 200",
                         what="a request steered to a Pod, the picker up")
    traffic.topology.delete("Pod", "endpoint-picker")
    traffic.consistently(traffic.send(target, pick=ip),
                         lambda a: None if a.status >= 500 and not a.pod else "wanted a 5xx that no Pod served",
                         what="T3: FailClose with the endpoint picker gone")
