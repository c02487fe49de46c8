"""A pool whose endpoint picker reference names a Service without a port reaches the picker on 9002
(T8): the v1alpha2 `extensionRef.portNumber` says implementations SHOULD infer 9002, so a gateway that
does not is reported under "SHOULD not met", never failed (conformance.should). Upstream: none (GIE's
suites never leave the port out)."""

import pytest

pytestmark = [pytest.mark.rule("T8"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic"),
              pytest.mark.api_revision_has("picker_port_default")]


def test_default_picker_port(traffic, should):
    traffic.deploy(overlay="default-picker-port.yaml")
    target, pods = traffic.target(), traffic.ready_pods()
    with should("T8: a picker reference without a port SHOULD reach the picker on 9002"):
        for ip, name in pods.items():  # each Pod, picked alone, serves: the picker is asked and followed
            traffic.consistently(
                traffic.send(target, pick=ip),
                lambda a, name=name: None if (a.status, a.pod) == (200, name) else f"wanted 200 from {name}",
                what=f"a request steered to {name} ({ip})")
