"""What a traffic test holds: its topology deployed, its Gateway's address, its Pods, and requests to it.

Why here and not in each test: every traffic rule starts the same way (deploy a traffic topology, wait
until the Gateway has an address and the pool's Pods are Ready, find where this process reaches that
address) and judges answers the same way (`client.until_consistent`). A test then reads as the rule:
steer to a Pod, see who served. Objects are created through the status tier's `Topology`, so they are
tracked and deleted with the test's namespace like every other test's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ..conditions import Judgement
from ..topology import Topology
from ..wait import wait_for
from . import client, manifests

GATEWAY_API = "gateway.networking.k8s.io/v1"
PORT = 80  # the traffic manifests' Gateway listener
MODEL_SERVERS = ("model-server-0", "model-server-1", "model-server-2")  # the pool's Pods in the manifests
# The readiness gate the suite owns (`deploy(readiness_gate=True)`): a test turns a Pod NotReady on any
# cluster by setting this condition False in the Pod's status; the kubelet then computes Ready False.
SERVING_GATE = "inference-conformance/serving"
_STRATEGIC = "application/strategic-merge-patch+json"  # conditions merge by type: the kubelet's stay


def _ready(pod: dict | None) -> bool:
    status = (pod or {}).get("status") or {}
    return bool(status.get("podIP")) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                             for c in status.get("conditions") or [])


@dataclass
class Traffic:
    topology: Topology
    routes: dict[str, str]  # Gateway "address:port" -> where this process connects for it ({} : as is)
    model_server_image: str
    epp_image: str

    @property
    def kube(self):
        return self.topology.kube

    @property
    def namespace(self) -> str:
        return self.topology.namespace

    def deploy(self, name: str = "pool-with-picker.yaml", *, failure_mode: str = "FailClose",
               readiness_gate: bool = False) -> None:
        """Apply manifests/traffic/<name> into the test's namespace.

        `readiness_gate`: the model servers (label app: model-server) also get the readiness gate
        SERVING_GATE, its condition set True at once (nothing else writes it), so that `set_serving`
        can turn one NotReady later through its kubelet, whichever kubelet that is.
        """
        docs = manifests.load(name, namespace=self.namespace, gateway_class=self.topology.gateway_class,
                              api=self.topology.revision.api, model_server_image=self.model_server_image,
                              epp_image=self.epp_image, failure_mode=failure_mode)
        gated = [d for d in docs if readiness_gate and d["kind"] == "Pod"
                 and (d["metadata"].get("labels") or {}).get("app") == "model-server"]
        for pod in gated:
            pod["spec"]["readinessGates"] = [{"conditionType": SERVING_GATE}]
        for doc in docs:
            self.topology.create(doc)
        for pod in gated:
            self.set_serving(pod["metadata"]["name"], True)

    def set_serving(self, pod: str, serving: bool) -> None:
        """Write SERVING_GATE's condition into the Pod's status (`pods/status`, a strategic merge patch,
        so the kubelet's own conditions stay); the kubelet makes Ready follow it."""
        condition = {"type": SERVING_GATE, "status": "True" if serving else "False",
                     "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "reason": "Serving" if serving else "NotServing",
                     "message": f"set {'True' if serving else 'False'} by the conformance suite"}
        self.kube.request("PATCH", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/status",
                          body={"status": {"conditions": [condition]}}, content_type=_STRATEGIC)

    def not_ready(self, pod: str) -> dict:
        """The Pod once its Ready condition is False (its kubelet has taken a change in)."""
        def unready(obj: dict | None) -> bool:
            return any(c.get("type") == "Ready" and c.get("status") == "False"
                       for c in ((obj or {}).get("status") or {}).get("conditions") or [])

        return wait_for(self.kube, "v1", "Pod", pod, self.namespace, unready,
                        timeout=self.topology.timeouts.MaxTimeToConsistency, what=f"Pod {pod}",
                        expected="the Pod's Ready condition is False (its kubelet computes Ready from the "
                                 f"readiness gate {SERVING_GATE}, whose condition is False)")

    def target(self, gateway: str = "gateway", port: int = PORT) -> str:
        """Where requests to the Gateway go ("address:port"), once it has an address."""
        def addressed(gw: dict | None) -> bool | Judgement:
            addresses = ((gw or {}).get("status") or {}).get("addresses") or []
            return bool(addresses and addresses[0].get("value"))

        gw = wait_for(self.kube, GATEWAY_API, "Gateway", gateway, self.namespace, addressed,
                      timeout=self.topology.timeouts.GatewayMustHaveCondition, what=f"Gateway {gateway}",
                      expected="status.addresses has the Gateway's address")
        address = gw["status"]["addresses"][0]["value"]
        inside = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        return self.routes.get(inside, inside)

    def ready_pods(self, *names: str) -> dict[str, str]:
        """{pod IP: pod name} of these Pods (default: the topology's model servers), once each is Ready."""
        found: dict[str, str] = {}
        for name in names or MODEL_SERVERS:
            pod = wait_for(self.kube, "v1", "Pod", name, self.namespace, _ready,
                           timeout=self.topology.timeouts.NamespacesMustBeReady, what=f"Pod {name}",
                           expected="the Pod is Ready and has an IP")
            found[pod["status"]["podIP"]] = name
        return found

    def send(self, target: str, *, pick: str | None = None, path: str = "/", **kw):
        """A function that POSTs one request (steered to `pick`, IP or IP:port, when given)."""
        headers = {client.SELECTION_HEADER: pick} if pick else {}
        return lambda: client.post(target, path=path, headers=headers, **kw)

    def many(self, send, n: int = 100, concurrency: int = 10) -> list:
        """n answers, `concurrency` at a time (upstream: 100 requests, 10 at a time)."""
        return client.many(send, n, concurrency)

    def consistently(self, send, check, what: str):
        """The answer once `check` has held for 3 answers in a row (MaxTimeToConsistency at most)."""
        return client.until_consistent(send, check, what=what, timeout=self.topology.timeouts.MaxTimeToConsistency)
