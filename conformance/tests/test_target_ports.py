"""Every targetPort of a pool is used as picked: a request the endpoint picker steers to IP:port is
served by that Pod on that port, for every port of every Pod, also 100 at 10 at a time (T8, v1 data
parallelism: the pick names a rank). Upstream: GatewayFollowingEPPRoutingWithDataParallelism, whose
model servers run Gateway API's echo server once per port and report the port in `httpPort`
(manifests/traffic/target-ports.yaml, an overlay of pool-with-picker.yaml)."""

import pytest

pytestmark = [pytest.mark.rule("T8"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic"),
              pytest.mark.api_revision_has("multiple_target_ports")]

PORTS = ("3000", "3002", "3004")  # the pool's targetPorts


def test_target_ports(traffic):
    traffic.deploy(overlay="target-ports.yaml")
    target, pods = traffic.target(), traffic.ready_pods()
    for ip, name in pods.items():
        for port in PORTS:
            wanted = (200, name, port, f"{ip}:{port}")
            traffic.consistently(
                traffic.send(target, pick=f"{ip}:{port}"),
                lambda a, wanted=wanted: None if (a.status, a.pod, a.echo.get("httpPort"), a.served) == wanted
                else f"wanted 200 from {wanted[1]} on port {wanted[2]} (served endpoint {wanted[3]}), got "
                     f"port {a.echo.get('httpPort')!r}, served endpoint {a.served!r}",
                what=f"T8: a request steered to {name} on port {port}")
    ranks = {(name, port) for (ip, name), port in zip(sorted(pods.items()), PORTS, strict=True)}
    pick = ",".join(f"{ip}:{port}" for (ip, _), port in zip(sorted(pods.items()), PORTS, strict=True))
    wrong = [a for a in traffic.many(traffic.send(target, pick=pick))
             if a.status != 200 or (a.pod, a.echo.get("httpPort")) not in ranks]
    assert not wrong, (f"T8: {len(wrong)} of 100 requests steered to {pick} were not served by one of those Pods "
                       f"on its picked port: {wrong[0].describe()} on port {wrong[0].echo.get('httpPort')!r}")
