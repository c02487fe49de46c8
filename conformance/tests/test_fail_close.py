"""FailClose, the default: with the endpoint picker gone, requests are refused with a 5xx and never
reach a model server (T3). The refusal must last: it is watched for TrafficHoldWindow seconds after
the picker's Pod is gone, since a gateway that fails open once it notices would refuse only until then."""

import pytest

pytestmark = [pytest.mark.rule("T3"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def refused(answer):
    return None if answer.status >= 500 and not answer.pod else "wanted a 5xx that no Pod served"


def test_fail_close(traffic):
    traffic.deploy(failure_mode="FailClose")
    target, pods = traffic.target(), traffic.ready_pods()
    ip = next(iter(pods))
    traffic.consistently(traffic.send(target, pick=ip), lambda a: None if a.status == 200 else "wanted 200",
                         what="a request steered to a Pod, the picker up")
    traffic.remove_picker()
    what = "T3: FailClose with the endpoint picker gone"
    traffic.consistently(traffic.send(target, pick=ip), refused, what=what)
    traffic.holds(traffic.send(target, pick=ip), refused, what=what)
