"""A Pod of the pool that turns NotReady gets no new requests once the change has propagated (T7).
Upstream has no such test.

How a Pod turns NotReady on any cluster, its container untouched: the model servers carry a readiness
gate the suite owns (`tier.SERVING_GATE`), its condition set True at deploy; the test sets one Pod's to
False and the Pod's kubelet computes Ready False, as for a failing readiness probe. Upstream's test EPP
refuses a request that names no endpoint, so with the picker up the requests that leave it the choice
name every Pod of the pool. The pool fails open: with the picker gone, requests carry no steering at
all and the gateway alone chooses, which is where its own view of readiness shows."""

import pytest

pytestmark = [pytest.mark.rule("T7"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]


def test_not_ready_pod(traffic):
    traffic.deploy(failure_mode="FailOpen", readiness_gate=True)
    target, pods = traffic.target(), traffic.ready_pods()
    gone = "model-server-1"
    gone_ip = next(ip for ip, name in pods.items() if name == gone)
    others = sorted(set(pods.values()) - {gone})

    def all_served_by_others(send, what):
        # Side by side, 30 at a time, until a batch is served whole: a gateway that is still catching up
        # (the picker has just gone, say) may get some of an earlier batch wrong, never all of the last.
        traffic.batch_consistently(send, lambda a: None if a.status == 200 and a.pod in others
                                   else f"wanted 200 from one of the Ready Pods {others}", what=f"T7: {what}", n=30)

    traffic.consistently(traffic.send(target, pick=gone_ip),
                         lambda a: None if (a.status, a.pod) == (200, gone) else f"wanted 200 from {gone}",
                         what=f"T7: a request steered to {gone} while it is Ready")
    traffic.set_serving(gone, False)
    traffic.not_ready(gone)
    traffic.consistently(traffic.send(target, pick=gone_ip),
                         lambda a: None if a.pod != gone else f"wanted no request to reach {gone}, it is NotReady",
                         what=f"T7: a request steered to {gone} after it turned NotReady")
    all_served_by_others(traffic.send(target, pick=",".join(sorted(pods))),
                         f"requests naming every Pod of the pool after {gone} turned NotReady")

    traffic.remove_picker()  # FailOpen: the gateway picks, among the Ready Pods
    unsteered = traffic.send(target)
    traffic.consistently(unsteered, lambda a: None if a.status == 200 and a.pod in others
                         else f"wanted 200 from one of the Ready Pods {others}",
                         what=f"T7: a request with the picker gone (FailOpen) after {gone} turned NotReady")
    all_served_by_others(unsteered, f"requests with the picker gone (FailOpen) after {gone} turned NotReady")
