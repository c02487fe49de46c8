"""An endpoint picker reference to an ExternalName Service is never followed: no connection reaches the
Service's target, and requests are not served through it (T5 = X3; the API: ExternalName Services "may
not be safe to forward to", implementations MUST NOT support them).

The target is a sentinel Pod whose container listens on the picker port and exits on its first
connection, so that the Kubernetes API shows any connection, on the embedded cluster and on yours; the
Pod's status is read only once a connection the test makes itself, last, shows there too. The pool
fails closed (the default), and the picker it names is one a gateway must not use: both readings, a
picker unavailable under FailClose (T3) and a backend that cannot be served (Gateway API: 500), refuse
the request with a 5xx that no Pod served. No endpoint picker runs, so unlike T1-T4 this judges the
v1alpha2 API too."""

import pytest

pytestmark = [pytest.mark.rule("T5", "X3"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_externalname_traffic(traffic):
    sentinel = traffic.sentinel()
    traffic.deploy("externalname-picker.yaml", skip=sentinel.parts, picker_address=sentinel.address)
    target, pods = traffic.target(), traffic.ready_pods()
    send = traffic.send(target, pick=next(iter(pods)))
    traffic.consistently(send, lambda a: None if a.status not in (0, 404) else "wanted the route's answer, not 404",
                         what="T5: requests to a pool whose endpoint picker is an ExternalName Service")
    wrong = [a.describe() for a in traffic.many(send, n=20) if a.status < 500 or a.pod]
    assert not wrong, (f"T5: {len(wrong)} of 20 requests to a FailClose pool whose endpoint picker is an ExternalName "
                       f"Service were not refused with a 5xx that no Pod served: {wrong[0]}")
    seen = sentinel.connections(target)
    assert not seen, (f"T5: the ExternalName Service's target ({sentinel.address}:9002, the sentinel Pod) was "
                      f"connected to; the rule wants no connection ever: {'; '.join(seen)}")
