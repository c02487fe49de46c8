"""A pool with `appProtocol: kubernetes.io/h2c` is reached over h2c, cleartext HTTP/2 with prior
knowledge: a request steered to each Pod is served by it over HTTP/2 on the pool's port (T8, v1.4+).
Upstream: InferencePoolAppProtocol, on Gateway API's echo server, which serves h2c on H2C_PORT (3001)
and answers HTTP/1.1 there 400 (manifests/traffic/h2c-pool.yaml, an overlay of pool-with-picker.yaml)."""

import pytest

pytestmark = [pytest.mark.rule("T8"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic"),
              pytest.mark.api_revision_has("app_protocol")]


def test_h2c_pool(traffic):
    traffic.deploy(overlay="h2c-pool.yaml")
    target, pods = traffic.target(), traffic.ready_pods()
    for ip, name in pods.items():
        wanted = (200, name, "HTTP/2.0", f"{ip}:3001")
        traffic.consistently(
            traffic.send(target, pick=f"{ip}:3001"),
            lambda a, wanted=wanted: None if (a.status, a.pod, a.echo.get("proto"), a.served) == wanted
            else f"wanted 200 from {wanted[1]} over HTTP/2.0 (served endpoint {wanted[3]}), got protocol "
                 f"{a.echo.get('proto')!r}, served endpoint {a.served!r}",
            what=f"T8: a request to the h2c pool steered to {name}")
