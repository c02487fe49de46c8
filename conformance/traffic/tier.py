"""What a traffic test holds: its topology deployed, its Gateway's address, its Pods, and requests to it.

Why here and not in each test: every traffic rule starts the same way (deploy a traffic topology, wait
until the Gateway has an address and the pool's Pods are Ready, find where this process reaches that
address) and judges answers the same way (`client.until_consistent`). A test then reads as the rule:
steer to a Pod, see who served. Objects are created through the status tier's `Topology`, so they are
tracked and deleted with the test's namespace like every other test's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..conditions import Judgement
from ..options import DEFAULT_SENTINEL_IMAGE
from ..topology import PreconditionFailed, Topology
from ..wait import WaitTimeout, wait_for
from . import client, manifests

GATEWAY_API = "gateway.networking.k8s.io/v1"
PORT = 80  # the traffic manifests' Gateway listener
MODEL_SERVERS = ("model-server-0", "model-server-1", "model-server-2")  # the pool's Pods in the manifests
# The readiness gate the suite owns (`deploy(readiness_gate=True)`): a test turns a Pod NotReady on any
# cluster by setting this condition False in the Pod's status; the kubelet then computes Ready False.
SERVING_GATE = "inference-conformance/serving"
_STRATEGIC = "application/strategic-merge-patch+json"  # conditions merge by type: the kubelet's stay
# manifests/traffic/two-pools.yaml (rule T6): two pools over disjoint Pods, each with its own picker, and
# the Gateways and HTTPRoutes a test chooses from (`two_pools`).
TWO_POOLS = "two-pools.yaml"
POOLS = {"primary": ("primary-0", "primary-1"), "secondary": ("secondary-0", "secondary-1")}
TWO_POOLS_ROUTING = ("Gateway/gateway", "Gateway/secondary-gateway", "HTTPRoute/rules", "HTTPRoute/weighted",
                     "HTTPRoute/to-primary", "HTTPRoute/to-secondary")
PICKER = "endpoint-picker"  # the endpoint picker's Pod in the manifests of one pool
SENTINEL = "sentinel"  # the Pod of manifests/traffic/externalname-picker.yaml whose containers exit on a connection
WITNESS = "witness"  # its container (and Service, and HTTPRoute) that the test itself connects to, last


def _ready(pod: dict | None) -> bool:
    status = (pod or {}).get("status") or {}
    return bool(status.get("podIP")) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                             for c in status.get("conditions") or [])


@dataclass
class Traffic:
    topology: Topology
    routes: dict[str, str]  # Gateway "address:port" -> where this process connects for it ({}: as is)
    model_server_image: str
    epp_image: str
    sentinel_image: str = DEFAULT_SENTINEL_IMAGE
    # Image -> why its Pods are known not to get Ready on this cluster (shared by the run's tests): a
    # later test waits only a short grace for Pods of that image, not its whole timeout again.
    unready_images: dict[str, str] = field(default_factory=dict)
    _images: dict[str, list[str]] = field(default_factory=dict)  # Pod name -> its containers' images

    @property
    def kube(self):
        return self.topology.kube

    @property
    def namespace(self) -> str:
        return self.topology.namespace

    def deploy(self, name: str = "pool-with-picker.yaml", *, overlay: str | None = None,
               failure_mode: str = "FailClose", readiness_gate: bool = False, only: Iterable[str] | None = None,
               skip: Iterable[str] = (), **values) -> None:
        """Apply manifests/traffic/<name> into the test's namespace: its objects named `Kind/name` in
        `only` (default: all) and not in `skip`; `values` fill in placeholders a test learns as it runs.

        `overlay`: another file of manifests/traffic/ whose objects take the place of those of <name>
        with the same `Kind/name` (and are added when <name> has none): a topology that differs from
        <name> in its model servers or its pool alone says only that.

        `readiness_gate`: the model servers (label app: model-server) also get the readiness gate
        SERVING_GATE, its condition set True at once (nothing else writes it), so that `set_serving`
        can turn one NotReady later through its kubelet, whichever kubelet that is.
        """
        only, skip = None if only is None else set(only), set(skip)
        ports: dict = {}  # the EPPs' ports: the same in <name> and its overlay

        def load(file: str) -> list[dict]:
            return manifests.load(file, namespace=self.namespace, gateway_class=self.topology.gateway_class,
                                  api=self.topology.revision.api, model_server_image=self.model_server_image,
                                  epp_image=self.epp_image, failure_mode=failure_mode, ports=ports,
                                  sentinel_image=self.sentinel_image, values=values)

        def ident(d: dict) -> str:
            return f"{d['kind']}/{d['metadata']['name']}"

        replacing = {ident(d): d for d in load(overlay)} if overlay else {}
        docs = [replacing.pop(ident(d), d) for d in load(name)] + list(replacing.values())
        docs = [d for d in docs if (only is None or ident(d) in only) and ident(d) not in skip]
        gated = [d for d in docs if readiness_gate and d["kind"] == "Pod"
                 and (d["metadata"].get("labels") or {}).get("app") == "model-server"]
        for pod in gated:
            pod["spec"]["readinessGates"] = [{"conditionType": SERVING_GATE}]
        for doc in docs:
            if doc["kind"] == "Pod":
                self._images[doc["metadata"]["name"]] = [c["image"] for c in doc["spec"]["containers"]]
            self.topology.create(doc)
        for pod in gated:
            self.set_serving(pod["metadata"]["name"], True)

    def two_pools(self, *routing: str) -> dict[str, dict[str, str]]:
        """Deploy TWO_POOLS: both pools with their Pods and pickers, and of its Gateways and HTTPRoutes
        only `routing` ("Kind/name"); {pool: {pod IP: pod name}} once every Pod of both, the pickers' too,
        is Ready (as upstream's suite waits for its Deployments: two pickers may take a while to start)."""
        unknown = set(routing) - set(TWO_POOLS_ROUTING)
        if unknown:
            raise ValueError(f"not in {TWO_POOLS}: {sorted(unknown)}")
        self.deploy(TWO_POOLS, skip=set(TWO_POOLS_ROUTING) - set(routing))
        self.ready_pods(*(f"{pool}-picker" for pool in POOLS))
        return {pool: self.ready_pods(*pods) for pool, pods in POOLS.items()}

    def only_pool(self, pools: dict[str, dict[str, str]], pool: str, target: str, path: str, where: str) -> None:
        """Rule T6 for requests to `target` on `path` (`where` says which rule or Gateway that is): they
        reach pool `pool` and no other. Each of its Pods, steered to alone, serves (3 consistent
        answers); each Pod of another pool, steered to alone, does not; 30 requests naming every Pod of
        every pool are each served (200) by a Pod of `pool`, whose picker keeps its own."""
        own = pools[pool]
        for ip, name in own.items():
            self.consistently(self.send(target, pick=ip, path=path),
                              lambda a, name=name: None if (a.status, a.pod) == (200, name)
                              else f"wanted 200 from {name}, a Pod of pool {pool}",
                              what=f"T6: a request {where} steered to {name} ({ip})")
        for other, pods in pools.items():
            for ip, name in pods.items() if other != pool else ():
                self.consistently(self.send(target, pick=ip, path=path),
                                  lambda a, name=name, other=other: None if a.pod != name
                                  else f"wanted no answer from {name}: it is a Pod of pool {other}, not {pool}",
                                  what=f"T6: a request {where} steered to {name} ({ip}) of the other pool")
        everyone = ",".join(sorted(ip for pods in pools.values() for ip in pods))
        answers = self.many(self.send(target, pick=everyone, path=path), n=30)
        wrong = [a.describe() for a in answers if a.status != 200 or a.pod not in own.values()]
        assert not wrong, (f"T6: {len(wrong)} of 30 requests {where} naming every Pod of both pools were not served "
                           f"(200) by a Pod of pool {pool} {sorted(own.values())}: {wrong[0]}")

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
                      expected="status.addresses has the Gateway's address",
                      guard=self.topology.implementation_alive)
        address = gw["status"]["addresses"][0]["value"]
        return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"

    def ready_pods(self, *names: str) -> dict[str, str]:
        """{pod IP: pod name} of these Pods, once each is Ready. By default the topology's model servers,
        once they and its endpoint picker's Pod (when deployed) are Ready, as upstream's suite waits for
        the picker's Deployment: a request sent before the picker serves is one the picker never saw, and
        a FailOpen pool serves it from a Pod of the gateway's choosing, which may be the one a check wants."""
        found: dict[str, str] = {}
        for name in names or MODEL_SERVERS:
            pod = self.ready_pod(name, "the Pod is Ready and has an IP")
            found[pod["status"]["podIP"]] = name
        if not names and PICKER in self._images:
            self.ready_pod(PICKER, "the endpoint picker's Pod is Ready and has an IP")
        return found

    def ready_pod(self, name: str, expected: str) -> dict:
        """The Pod once it is Ready. One systemic problem (an image the cluster cannot pull or run) must
        not cost every traffic test its whole wait: once Pods of an image never got Ready, later Pods of
        it get a short grace, and fail with the first failure's line."""
        known = [self.unready_images[i] for i in self._images.get(name, []) if i in self.unready_images]
        timeout = self.topology.timeouts.NamespacesMustBeReady
        if known:
            timeout = min(timeout, self.topology.timeouts.MaxTimeToConsistency / 3)
        try:
            return wait_for(self.kube, "v1", "Pod", name, self.namespace, _ready, timeout=timeout,
                            what=f"Pod {name}", expected=expected)
        except WaitTimeout as e:
            if known:
                raise AssertionError(f"Pod {name} is not Ready within {timeout:g}s either; {known[0]}") from None
            line = f"Pods of image {{}} never got Ready in an earlier traffic test ({e.headline()})"
            for image in self._images.get(name, []):
                self.unready_images.setdefault(image, line.format(image))
            raise

    def send(self, target: str, *, pick: str | None = None, path: str = "/", **kw):
        """A function that POSTs one request (steered to `pick`, IP or IP:port, when given)."""
        headers = {client.SELECTION_HEADER: pick} if pick else {}
        return lambda: client.post(target, path=path, headers=headers, via=self.routes.get(target), **kw)

    def many(self, send, n: int = 100, concurrency: int = 10) -> list:
        """n answers, `concurrency` at a time (upstream: 100 requests, 10 at a time)."""
        return client.many(send, n, concurrency)

    def consistently(self, send, check, what: str):
        """The answer once `check` has held for 3 answers in a row (MaxTimeToConsistency at most)."""
        return client.until_consistent(send, check, what=what, timeout=self.topology.timeouts.MaxTimeToConsistency)

    def batch_consistently(self, send, check, what: str, n: int = 20) -> list:
        """The answers of the first batch of n (10 at a time) that all pass `check` (MaxTimeToConsistency
        at most)."""
        return client.until_batch_passes(send, check, what=what, n=n,
                                         timeout=self.topology.timeouts.MaxTimeToConsistency)

    def holds(self, send, check, what: str) -> int:
        """How many answers came in TrafficHoldWindow seconds, every one of them passing `check`."""
        return client.holds(send, check, what=what, seconds=self.topology.timeouts.TrafficHoldWindow)

    def remove_picker(self, name: str = PICKER) -> None:
        """Delete the endpoint picker's Pod and wait until it is gone from the API (its process has
        ended and the Pod's endpoints are withdrawn: what a gateway can learn of it has happened)."""
        self.topology.delete("Pod", name)
        wait_for(self.kube, "v1", "Pod", name, self.namespace, lambda pod: pod is None,
                 timeout=self.topology.timeouts.DeleteTimeout, what=f"Pod {name}",
                 expected="the endpoint picker's Pod is deleted")

    def sentinel(self, name: str = "externalname-picker.yaml") -> Sentinel:
        """Deploy the sentinel Pod of manifests/traffic/<name> alone and wait until it is Ready (rule T5)."""
        self.deploy(name, only=[f"Pod/{SENTINEL}"])
        pod = self.ready_pod(SENTINEL, "the sentinel Pod is Ready (its containers listen) and has an IP")
        ips = [p.get("ip") for p in pod["status"].get("podIPs") or [{"ip": pod["status"]["podIP"]}]]
        address = next((ip for ip in ips if ip and ipaddress.ip_address(ip).version == 4), None)
        if address is None:
            raise PreconditionFailed(f"the sentinel Pod has no IPv4 address ({', '.join(map(str, ips))})", "T5",
                                     "an ExternalName Service takes a DNS-1123 name, which an IPv4 address is "
                                     "and an IPv6 one is not")
        started = {c["name"]: (c.get("state") or {}).get("running", {}).get("startedAt")
                   for c in pod["status"].get("containerStatuses") or []}
        return Sentinel(self, name, address, started)


@dataclass
class Sentinel:
    """A Pod whose containers each listen on one port and exit on the first connection they accept, so
    that a connection shows in the Kubernetes API on any cluster (conformance.traffic.sentinel)."""

    traffic: Traffic
    manifest: str
    address: str  # the Pod's IPv4 address
    started: dict[str, str | None]  # container -> state.running.startedAt once the Pod was Ready
    parts: tuple[str, ...] = field(default=(f"Pod/{SENTINEL}", f"Service/{WITNESS}", f"HTTPRoute/{WITNESS}"))

    def connections(self, target: str) -> list[str]:
        """What the containers other than the witness show of connections, one line each (none: []).

        Read from a Pod status written after every request sent before this call: the witness's Service
        and HTTPRoute are applied only now, and requests go to /witness through the Gateway until the
        witness container shows its connection (or another container shows one: that needs no freshness).
        That also proves that this cluster's sentinel shows a connection; if the witness never does, the
        count means nothing and this fails as a precondition."""
        traffic = self.traffic
        traffic.deploy(self.manifest, only=self.parts[1:])
        seen: dict = {}

        def check(_answer: client.Answer) -> str | None:
            seen["pod"] = traffic.kube.get("v1", "Pod", SENTINEL, traffic.namespace)
            if container_connections(seen["pod"], {WITNESS: self.started.get(WITNESS)}) or self.seen(seen["pod"]):
                return None
            return f"the {WITNESS} container of Pod {SENTINEL} shows no connection yet"

        timeout = traffic.topology.timeouts.MaxTimeToConsistency
        try:
            client.until_consistent(traffic.send(target, path=f"/{WITNESS}"), check, times=1, timeout=timeout,
                                    what=f"requests to /{WITNESS} through the Gateway")
        except client.NotConsistent as e:
            raise PreconditionFailed(
                f"a connection to the sentinel Pod's {WITNESS} container (HTTPRoute {WITNESS} -> Service {WITNESS}) "
                f"does not show in its status", "T5",
                f"{e}; without that, zero connections seen at the picker proves nothing (--sentinel-image must exit "
                "on its first connection, as busybox's `nc -l -p PORT -e false` does)") from None
        return self.seen(seen["pod"])

    def seen(self, pod: dict | None) -> list[str]:
        """The connections the Pod's containers other than the witness show."""
        return container_connections(pod, {k: v for k, v in self.started.items() if k != WITNESS})


def container_connections(pod: dict | None, started: dict[str, str | None]) -> list[str]:
    """One line per container of `started` whose status shows that it stopped since it started then:
    it exited, was restarted, or runs since another time (a sentinel exits on its first connection)."""
    statuses = {c.get("name"): c for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []}
    out = []
    for name, first in started.items():
        c = statuses.get(name)
        if c is None:
            out.append(f"container {name} has no status (the Pod is gone?)")
            continue
        state, last = c.get("state") or {}, (c.get("lastState") or {}).get("terminated")
        if "terminated" in state:
            t = state["terminated"]
            out.append(f"container {name} exited with code {t.get('exitCode')} ({t.get('reason')}) at "
                       f"{t.get('finishedAt')}")
        elif c.get("restartCount"):
            out.append(f"container {name} was restarted {c['restartCount']} time(s)"
                       + (f", last exit code {last.get('exitCode')} at {last.get('finishedAt')}" if last else ""))
        elif "running" not in state:
            waiting = state.get("waiting") or {}
            out.append(f"container {name} is not running ({waiting.get('reason') or 'no state'})")
        elif first and state["running"].get("startedAt") != first:
            out.append(f"container {name} runs since {state['running'].get('startedAt')}, not since {first}")
    return out
