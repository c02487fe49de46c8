"""Plain-dict objects, as the API server returns them, and a fake API for the unit tests."""

from __future__ import annotations

import copy

from conformance.kube import ApiError
from reference_gateway.cache import Cache
from reference_gateway.controller import Controller
from reference_gateway.model import DEFAULT_CONTROLLER, INFERENCE_GROUP, KINDS, key
from reference_gateway.revisions import REVISIONS

NS = "ns1"
NOW = "2025-03-01T12:00:00Z"
LATER = "2025-03-01T12:05:00Z"


def _meta(name: str, ns: str | None, generation: int = 1, rv: str = "1") -> dict:
    md = {"name": name, "generation": generation, "resourceVersion": rv, "uid": f"uid-{ns}-{name}"}
    if ns:
        md["namespace"] = ns
    return md


class Objects:
    """Objects as the API server returns them (defaults filled in)."""

    ns = NS
    controller = DEFAULT_CONTROLLER

    def gateway_class(self, name="ours", controller=DEFAULT_CONTROLLER):
        return {"apiVersion": KINDS["GatewayClass"], "kind": "GatewayClass", "metadata": _meta(name, None),
                "spec": {"controllerName": controller}}

    def gateway(self, name="gw", cls="ours", ns=NS, listeners=None, generation=1):
        return {"apiVersion": KINDS["Gateway"], "kind": "Gateway", "metadata": _meta(name, ns, generation),
                "spec": {"gatewayClassName": cls,
                         "listeners": listeners or [{"name": "http", "port": 80, "protocol": "HTTP"}]}}

    def route(self, name="route", ns=NS, parents=("gw",), pools=("pool",), backends=(), generation=1, **spec):
        refs = [p if isinstance(p, dict) else {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": p}
                for p in parents]
        refs_b = [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": p, "port": 8000} for p in pools]
        return {"apiVersion": KINDS["HTTPRoute"], "kind": "HTTPRoute", "metadata": _meta(name, ns, generation),
                "spec": {"parentRefs": refs, "rules": [{"backendRefs": refs_b + list(backends)}], **spec}}

    def pool(self, name="pool", ns=NS, ext=None, status=None, generation=1):
        ext = {"group": "", "kind": "Service", "name": "epp", "failureMode": "FailClose", **(ext or {})}
        obj = {"apiVersion": KINDS["InferencePool"], "kind": "InferencePool",
               "metadata": _meta(name, ns, generation),
               "spec": {"selector": {"app": "model"}, "targetPortNumber": 8000, "extensionRef": ext}}
        if status is not None:
            obj["status"] = status
        return obj

    def service(self, name="epp", ns=NS, type_="ClusterIP"):
        return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, ns), "spec": {"type": type_}}

    def world(self, *objs, controller=DEFAULT_CONTROLLER) -> Cache:
        cache = Cache(controller)
        for o in objs:
            cache.store(o["kind"])[key(o)] = o
        return cache

    def basic(self, *extra):
        """Our class, a Gateway of it, a route from it to the pool, the pool and its Service."""
        pool = self.pool()
        return pool, self.world(self.gateway_class(), self.gateway(), self.route(), pool, self.service(), *extra)

    @staticmethod
    def entry_for(status: dict, gateway: str) -> dict | None:
        return next((e for e in status.get("parent") or [] if e["parentRef"].get("name") == gateway), None)

    @staticmethod
    def cond(entry: dict, type_: str) -> dict | None:
        return next((c for c in entry.get("conditions") or [] if c["type"] == type_), None)


class FakeKube:
    """Answers status PUTs like the API server: 409 when the resourceVersion is stale."""

    def __init__(self, objects):
        self.objects = {(o["kind"], *key(o)): copy.deepcopy(o) for o in objects}
        self.puts = []
        self.patches = []

    def replace(self, body, subresource=None):
        assert subresource == "status"
        k = (body["kind"], *key(body))
        cur = self.objects[k]
        self.puts.append(copy.deepcopy(body))
        if body["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict"}, "PUT", str(k))
        cur = {**cur, "status": copy.deepcopy(body["status"])}
        cur["metadata"] = {**cur["metadata"], "resourceVersion": str(int(cur["metadata"]["resourceVersion"]) + 1)}
        self.objects[k] = cur
        return copy.deepcopy(cur)

    def patch(self, api_version, kind, name, patch, namespace=None, subresource=None):
        """A JSON merge patch of /status (no resourceVersion: it never conflicts)."""
        assert subresource == "status" and set(patch) == {"status"}
        k = (kind, namespace or "", name)
        cur = copy.deepcopy(self.objects[k])
        self.patches.append(copy.deepcopy(patch))
        cur["status"] = {**(cur.get("status") or {}), **copy.deepcopy(patch["status"])}
        cur["metadata"]["resourceVersion"] = str(int(cur["metadata"]["resourceVersion"]) + 1)
        self.objects[k] = cur
        return copy.deepcopy(cur)

    def get(self, api_version, kind, name, namespace=None):
        return copy.deepcopy(self.objects.get((kind, namespace or "", name)))


def controller_for(objs, kube_objects, cache_objects=None):
    cache = Cache(objs.controller)
    for o in cache_objects if cache_objects is not None else kube_objects:
        cache.apply(o["kind"], "ADDED", o)
    kube = FakeKube(kube_objects)
    return Controller(kube, cache, REVISIONS["seed"]), kube
