"""Requests follow the endpoint picker: a request steered to a Pod is served by it, every time, also
100 at 10 at a time, and only by the Pods picked (T1). Upstream: GatewayFollowingEPPRouting."""

import pytest

pytestmark = [pytest.mark.rule("T1"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_epp_routing(traffic):
    traffic.deploy()
    target, pods = traffic.target(), traffic.ready_pods()
    for ip, name in pods.items():  # each Pod, picked alone, serves
        traffic.consistently(
            traffic.send(target, pick=ip),
            lambda a, name=name: None if (a.status, a.pod) == (200, name) else f"wanted 200 from {name}",
            what=f"a request steered to {name} ({ip})")
    ips = sorted(pods)
    for picked in ([ips[2]], ips[:2], ips):  # one, two, all three Pods picked: only those serve
        names = {pods[ip] for ip in picked}
        answers = traffic.many(traffic.send(target, pick=",".join(picked)))
        wrong = [a.describe() for a in answers if a.status != 200 or a.pod not in names]
        assert not wrong, (f"T1: {len(wrong)} of {len(answers)} requests steered to {sorted(names)} were not "
                           f"served by them: {wrong[0]}")
