"""What a traffic test holds: its topology deployed, its Gateway's address, its Pods, and requests to it.

Why here and not in each test: every traffic rule starts the same way (deploy a traffic topology, wait
until the Gateway has an address and the pool's Pods are Ready, find where this process reaches that
address) and judges answers the same way (`client.until_consistent`). A test then reads as the rule:
steer to a Pod, see who served. Objects are created through the status tier's `Topology`, so they are
tracked and deleted with the test's namespace like every other test's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..conditions import Judgement
from ..topology import Topology
from ..wait import wait_for
from . import client, manifests

GATEWAY_API = "gateway.networking.k8s.io/v1"
PORT = 80  # the traffic manifests' Gateway listener
MODEL_SERVERS = ("model-server-0", "model-server-1", "model-server-2")  # the pool's Pods in the manifests


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

    def deploy(self, name: str = "pool-with-picker.yaml", *, failure_mode: str = "FailClose") -> None:
        """Apply manifests/traffic/<name> into the test's namespace."""
        for doc in manifests.load(name, namespace=self.namespace, gateway_class=self.topology.gateway_class,
                                  api=self.topology.revision.api, model_server_image=self.model_server_image,
                                  epp_image=self.epp_image, failure_mode=failure_mode):
            self.topology.create(doc)

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
