"""Plain-dict objects, as the API server returns them, and a fake API for the unit tests.

`Objects` builds objects for one API revision: its pools in that API's shape,
its routes' backendRefs in that API's group. What the tests expect of each
revision is written down here (`FLAVOURS`), from SPEC sections 2 and 8, apart
from the controller's own `revisions.py`, and checked against it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from reference_gateway.cache import Cache
from reference_gateway.controller import Controller
from reference_gateway.kube import ApiError
from reference_gateway.model import DEFAULT_CONTROLLER, key
from reference_gateway.revisions import REVISIONS

NS = "ns1"
NOW = "2025-03-01T12:00:00Z"
LATER = "2025-03-01T12:05:00Z"
GW_API = "gateway.networking.k8s.io/v1"
X_GROUP, GA_GROUP = "inference.networking.x-k8s.io", "inference.networking.k8s.io"

# The placeholder parent a v0.5 CRD defaults status to, as the API server reads it back.
PLACEHOLDER = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Status", "name": "default"},
               "conditions": [{"type": "Accepted", "status": "Unknown", "reason": "Pending",
                               "message": "Waiting for controller", "lastTransitionTime": "1970-01-01T00:00:00Z"}]}


@dataclass(frozen=True)
class Flavour:
    """What the tests expect of one API revision."""

    group: str
    version: str
    status_key: str  # "parent" / "parents"
    ref_style: str  # "object" (corev1.ObjectReference) / "parent" ({group, kind, name, namespace})
    placeholder: bool = False  # the CRD defaults status to PLACEHOLDER
    not_accepted_reason: str | None = None  # Accepted False reason for a Gateway whose routes it rejected
    controller_name: bool = False  # entries carry controllerName
    picker_optional: bool = False  # a pool may have no endpoint picker reference

    @property
    def v1(self) -> bool:
        return self.group == GA_GROUP


_SEED = Flavour(X_GROUP, "v1alpha2", "parent", "object")
_GA = dict(group=GA_GROUP, version="v1", status_key="parents", ref_style="parent",
           not_accepted_reason="HTTPRouteNotAccepted")
FLAVOURS: dict[str, Flavour] = {
    "seed": _SEED, "v0.2": _SEED, "v0.3": _SEED, "v0.4": _SEED,
    "v0.5": Flavour(X_GROUP, "v1alpha2", "parent", "parent", placeholder=True,
                    not_accepted_reason="HTTPRouteNotAccepted"),
    "v1.0": Flavour(**_GA),
    "v1.0.2": Flavour(**_GA),
    "v1.1": Flavour(**_GA, controller_name=True),
    "v1.4": Flavour(**_GA, controller_name=True),
    "v1.6": Flavour(**_GA, controller_name=True, picker_optional=True),
}
# The revisions the generic unit tests run under: each shape of parentRef, with and
# without a placeholder, with and without controllerName, a required and an optional picker.
TESTED = ["seed", "v0.5", "v1.0", "v1.6"]


def _meta(name: str, ns: str | None, generation: int = 1, rv: str = "1") -> dict:
    md = {"name": name, "generation": generation, "resourceVersion": rv, "uid": f"uid-{ns}-{name}"}
    if ns:
        md["namespace"] = ns
    return md


class Objects:
    """Objects as the API server returns them (defaults filled in), for one API revision."""

    ns = NS
    controller = DEFAULT_CONTROLLER

    def __init__(self, revision: str = "seed") -> None:
        self.name = revision
        self.rev = REVISIONS[revision]  # the controller's own, for calling it
        self.f = FLAVOURS[revision]  # what the tests expect

    def __repr__(self) -> str:
        return f"Objects({self.name})"

    # -- objects -----------------------------------------------------------------

    def gateway_class(self, name="ours", controller=DEFAULT_CONTROLLER):
        return {"apiVersion": GW_API, "kind": "GatewayClass", "metadata": _meta(name, None),
                "spec": {"controllerName": controller}}

    def gateway(self, name="gw", cls="ours", ns=NS, listeners=None, generation=1):
        return {"apiVersion": GW_API, "kind": "Gateway", "metadata": _meta(name, ns, generation),
                "spec": {"gatewayClassName": cls,
                         "listeners": listeners or [{"name": "http", "port": 80, "protocol": "HTTP"}]}}

    def pool_backend(self, name="pool", group=None, **extra):
        """A backendRef naming an InferencePool of this revision's API (or of `group`)."""
        return {"group": group or self.f.group, "kind": "InferencePool", "name": name, "port": 8000, **extra}

    def route(self, name="route", ns=NS, parents=("gw",), pools=("pool",), backends=(), generation=1, **spec):
        refs = [p if isinstance(p, dict) else {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": p}
                for p in parents]
        refs_b = [self.pool_backend(p) for p in pools]
        return {"apiVersion": GW_API, "kind": "HTTPRoute", "metadata": _meta(name, ns, generation),
                "spec": {"parentRefs": refs, "rules": [{"backendRefs": refs_b + list(backends)}], **spec}}

    def pool(self, name="pool", ns=NS, picker=None, status=None, generation=1, ports=(8000,), no_picker=False):
        """A pool in this revision's shape. `picker` overrides fields of the endpoint picker
        reference in neutral names (group, kind, name, port); `no_picker` leaves it out."""
        picker = {"group": "", "kind": "Service", "name": "epp", "failureMode": "FailClose", **(picker or {})}
        port = picker.pop("port", None)
        if self.f.v1:
            # v1 requires a port for a Service; the tests' pickers listen on 9002.
            port = port or (9002 if picker["kind"] == "Service" else None)
            if port:
                picker["port"] = {"number": port}
            spec = {"selector": {"matchLabels": {"app": "model"}}, "targetPorts": [{"number": p} for p in ports],
                    "endpointPickerRef": picker}
        else:
            if port:
                picker["portNumber"] = port
            spec = {"selector": {"app": "model"}, "targetPortNumber": ports[0], "extensionRef": picker}
        if no_picker:
            spec.pop("endpointPickerRef" if self.f.v1 else "extensionRef")
        obj = {"apiVersion": f"{self.f.group}/{self.f.version}", "kind": "InferencePool",
               "metadata": _meta(name, ns, generation), "spec": spec}
        if status is not None:
            obj["status"] = status
        return obj

    def picker(self, pool: dict) -> dict:
        """The pool's endpoint picker reference (to change it in place)."""
        return pool["spec"]["endpointPickerRef" if self.f.v1 else "extensionRef"]

    def service(self, name="epp", ns=NS, type_="ClusterIP"):
        return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, ns), "spec": {"type": type_}}

    def cache(self, controller=DEFAULT_CONTROLLER, revisions=None) -> Cache:
        return Cache(controller, revisions=(self.rev,) if revisions is None else revisions)

    def world(self, *objs, controller=DEFAULT_CONTROLLER, revisions=None) -> Cache:
        """A world holding exactly `objs` (stored as they are, no event handling)."""
        cache = self.cache(controller, revisions)
        for o in objs:
            cache.store(cache.resource_id(o))[key(o)] = o
        return cache

    def loaded(self, *objs, revisions=None) -> Cache:
        """A cache that saw an ADDED event for each of `objs`."""
        cache = self.cache(revisions=revisions)
        for o in objs:
            cache.apply(cache.resource_id(o), "ADDED", o)
        return cache

    def basic(self, *extra):
        """Our class, a Gateway of it, a route from it to the pool, the pool and its Service."""
        pool = self.pool()
        return pool, self.world(self.gateway_class(), self.gateway(), self.route(), pool, self.service(), *extra)

    def basic_objects(self):
        return [self.gateway_class(), self.gateway(), self.route(), self.pool(), self.service()]

    # -- expectations ------------------------------------------------------------

    def pool_item(self, name="pool", ns=NS, group=None):
        """The work item of a pool of this revision's API (or of `group`)."""
        return f"InferencePool.{group or self.f.group}", ns, name

    def pools(self, world, group=None) -> dict:
        return world.pools[group or self.f.group]

    def parents(self, status: dict) -> list[dict]:
        return status.get(self.f.status_key) or []

    def entry_for(self, status: dict, gateway: str) -> dict | None:
        return next((e for e in self.parents(status) if e["parentRef"].get("name") == gateway), None)

    @staticmethod
    def cond(entry: dict, type_: str) -> dict | None:
        return next((c for c in entry.get("conditions") or [] if c["type"] == type_), None)

    def gw_ref(self, name="gw", ns=NS, **changes) -> dict:
        """The parentRef naming Gateway ns/name as this revision spells it."""
        if self.f.ref_style == "object":
            ref = {"apiVersion": GW_API, "kind": "Gateway", "name": name, "namespace": ns}
        else:
            ref = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name, "namespace": ns}
        return {**ref, **changes}

    def foreign_entry(self, name="other-gw", ns=NS, controller=None) -> dict:
        """Another controller's entry (with its controllerName where the revision has the field)."""
        entry = {"parentRef": self.gw_ref(name, ns)}
        if self.f.controller_name:
            entry["controllerName"] = controller or "example.com/other"
        entry["conditions"] = [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                                "observedGeneration": 1, "lastTransitionTime": "2024-01-01T00:00:00Z"}]
        return entry

    @property
    def fresh(self) -> dict:
        """The status of a pool no controller has written (what the CRD defaults)."""
        return {self.f.status_key: [copy.deepcopy(PLACEHOLDER)]} if self.f.placeholder else {}

    @property
    def released(self) -> list[dict]:
        """The parent list once this controller no longer manages a pool nobody else reports on."""
        return [copy.deepcopy(PLACEHOLDER)] if self.f.placeholder else []


class FakeKube:
    """Answers status PUTs like the API server: 409 when the resourceVersion is stale.

    Objects are kept by work item (resource id, namespace, name)."""

    def __init__(self, objects, world):
        self.objects = {(world.resource_id(o), *key(o)): copy.deepcopy(o) for o in objects}
        self.puts = []
        self.patches = []

    def replace_status(self, resource, body):
        k = (resource.id, *key(body))
        assert (body["apiVersion"], body["kind"]) == (resource.api_version, resource.kind)
        cur = self.objects[k]
        self.puts.append(copy.deepcopy(body))
        if body["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict"}, "PUT", str(k))
        cur = {**cur, "status": copy.deepcopy(body["status"])}
        cur["metadata"] = {**cur["metadata"], "resourceVersion": str(int(cur["metadata"]["resourceVersion"]) + 1)}
        self.objects[k] = cur
        return copy.deepcopy(cur)

    def patch_status(self, resource, name, namespace, patch):
        """A JSON merge patch of /status (no resourceVersion: it never conflicts)."""
        assert set(patch) == {"status"}
        k = (resource.id, namespace or "", name)
        cur = copy.deepcopy(self.objects[k])
        self.patches.append(copy.deepcopy(patch))
        cur["status"] = {**(cur.get("status") or {}), **copy.deepcopy(patch["status"])}
        cur["metadata"]["resourceVersion"] = str(int(cur["metadata"]["resourceVersion"]) + 1)
        self.objects[k] = cur
        return copy.deepcopy(cur)

    def get(self, resource, name, namespace=None):
        return copy.deepcopy(self.objects.get((resource.id, namespace or "", name)))


def controller_for(objs, kube_objects, cache_objects=None, revisions=None):
    cache = objs.loaded(*(cache_objects if cache_objects is not None else kube_objects), revisions=revisions)
    kube = FakeKube(kube_objects, cache)
    return Controller(kube, cache), kube
