"""FailOpen: with the endpoint picker gone, requests are still served (200) by a Ready Pod of the
pool (T4). Upstream: EppUnAvailableFailOpen."""

import pytest

pytestmark = [pytest.mark.rule("T4"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_fail_open(traffic):
    traffic.deploy(failure_mode="FailOpen")
    target, pods = traffic.target(), traffic.ready_pods()
    ip = next(iter(pods))
    traffic.consistently(traffic.send(target, pick=ip), lambda a: None if a.status == 200 else "wanted 200",
                         what="a request steered to a Pod, the picker up")
    traffic.remove_picker()
    traffic.consistently(traffic.send(target, pick=ip),
                         lambda a: None if a.status == 200 and a.pod in pods.values()
                         else f"wanted 200 from one of {sorted(pods.values())}",
                         what="T4: FailOpen with the endpoint picker gone")
    answers = traffic.many(traffic.send(target, pick=ip), n=20)
    wrong = [a.describe() for a in answers if a.status != 200 or a.pod not in pods.values()]
    assert not wrong, f"T4: {len(wrong)} of 20 requests with the picker gone were not served by the pool: {wrong[0]}"
