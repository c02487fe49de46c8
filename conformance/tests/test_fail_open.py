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

    def served(a):
        return None if a.status == 200 and a.pod in pods.values() else f"wanted 200 from one of {sorted(pods.values())}"

    traffic.consistently(traffic.send(target, pick=ip), served, what="T4: FailOpen with the endpoint picker gone")
    # And side by side, as upstream's test sends them: a batch of 20, all served. A gateway that has not
    # yet noticed the picker is gone may refuse some of an earlier batch, never all of the last.
    traffic.batch_consistently(traffic.send(target, pick=ip), served,
                               what="T4: 20 requests side by side with the endpoint picker gone")
