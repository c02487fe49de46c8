"""The objects the controller knows and how they refer to each other.

Plain dicts as the API server returns them. `World` is the read-only view
the status computations take; the cache in `cache.py` is one. The resources
of the Gateway API and Services are fixed; the InferencePool resources are
those of the API revisions the controller was started with (`revisions.py`),
at most one per API group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .revisions import Revision

INFERENCE_GROUP = "inference.networking.x-k8s.io"  # v1alpha2
INFERENCE_GA_GROUP = "inference.networking.k8s.io"  # v1 (GA)
GATEWAY_GROUP = "gateway.networking.k8s.io"
DEFAULT_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"
POOL_KIND = "InferencePool"

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects
# A work item: (resource id, namespace, name) of an object whose status this controller writes.
Item = tuple[str, str, str]


@dataclass(frozen=True)
class Resource:
    """One kind of object the controller watches: where the API server serves it.

    `id` is how the cache and the work items name it: the kind, or for an
    InferencePool `InferencePool.<group>` (both APIs have a kind of that name)."""

    id: str
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


def pool_resource_id(group: str) -> str:
    return f"{POOL_KIND}.{group}"


# The resources every run watches, by id.
FIXED_RESOURCES: dict[str, Resource] = {r.id: r for r in (
    Resource("GatewayClass", "GatewayClass", GATEWAY_GROUP, "v1", "gatewayclasses", namespaced=False),
    Resource("Gateway", "Gateway", GATEWAY_GROUP, "v1", "gateways"),
    Resource("HTTPRoute", "HTTPRoute", GATEWAY_GROUP, "v1", "httproutes"),
    Resource("Service", "Service", "", "v1", "services"),
)}


def key(obj: dict) -> Key:
    md = obj.get("metadata") or {}
    return md.get("namespace") or "", md["name"]


def show(k: Key) -> str:
    return f"{k[0]}/{k[1]}" if k[0] else k[1]


def spec(obj: dict | None) -> dict:
    return (obj or {}).get("spec") or {}


def generation(obj: dict) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)


def terminating(obj: dict | None) -> bool:
    """Being deleted: it no longer counts, and its status is not worth writing."""
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


def parent_gateway_key(ref: dict, route_namespace: str) -> Key | None:
    """The Gateway a route's parentRef names, or None when it names something else."""
    if ref.get("group", GATEWAY_GROUP) != GATEWAY_GROUP or ref.get("kind", "Gateway") != "Gateway":
        return None
    return ref.get("namespace") or route_namespace, ref["name"]


def route_parent_refs(route: dict) -> Iterator[tuple[dict, Key]]:
    """Each distinct parentRef of the route that names a Gateway, with that Gateway's key."""
    seen: list[dict] = []
    for ref in spec(route).get("parentRefs") or []:
        gk = parent_gateway_key(ref, key(route)[0])
        if gk is not None and ref not in seen:
            seen.append(ref)
            yield ref, gk


def backend_group_kind(backend: dict) -> tuple[str, str]:
    # Gateway API defaults: a backendRef without group/kind is a core Service.
    return backend.get("group") or "", backend.get("kind") or "Service"


def route_backends(route: dict) -> Iterator[dict]:
    for rule in spec(route).get("rules") or []:
        yield from rule.get("backendRefs") or []


def route_pool_refs(route: dict | None) -> set[tuple[str, str, str]]:
    """(group, namespace, name) of every InferencePool the route's backendRefs name, of any group."""
    if not route:
        return set()
    ns = key(route)[0]
    return {(group, b.get("namespace") or ns, b["name"])
            for b in route_backends(route)
            for group, kind in [backend_group_kind(b)] if kind == POOL_KIND}


def route_service_keys(route: dict | None) -> set[Key]:
    if not route:
        return set()
    ns = key(route)[0]
    return {(b.get("namespace") or ns, b["name"]) for b in route_backends(route)
            if backend_group_kind(b) == ("", "Service")}


class World:
    """What the controller currently knows about the cluster.

    `revisions` are the InferencePool APIs watched, one revision each; a
    backendRef to an InferencePool of another group names nothing known."""

    def __init__(self, controller_name: str = DEFAULT_CONTROLLER, gateway_class: str | None = None,
                 revisions: Iterable[Revision] = ()) -> None:
        self.controller_name = controller_name
        self.gateway_class = gateway_class  # when set, only this class of ours is reconciled
        self.classes: dict[Key, dict] = {}
        self.gateways: dict[Key, dict] = {}
        self.routes: dict[Key, dict] = {}
        self.services: dict[Key, dict] = {}
        # API group -> its revision, and that API's pools.
        self.revisions: dict[str, Revision] = {}
        self.pools: dict[str, dict[Key, dict]] = {}
        for rev in revisions:
            group = rev.api.group
            if group in self.revisions:
                raise ValueError(f"two revisions of API group {group}: {self.revisions[group].name}, {rev.name}")
            self.revisions[group] = rev
            self.pools[group] = {}
        # Resource id -> the revision of each InferencePool resource watched.
        self.pool_kinds: dict[str, Revision] = {r.api.resource.id: r for r in self.revisions.values()}
        self.resources: dict[str, Resource] = {
            **FIXED_RESOURCES, **{r.api.resource.id: r.api.resource for r in self.revisions.values()}}
        self._stores: dict[str, dict[Key, dict]] = {
            "GatewayClass": self.classes, "Gateway": self.gateways, "HTTPRoute": self.routes,
            "Service": self.services,
            **{r.api.resource.id: self.pools[g] for g, r in self.revisions.items()}}

    def picker_service(self, ns: str, name: str, pool: dict) -> dict | None:
        """The Service `ns/name` that `pool`'s endpoint picker reference names, as known now."""
        return self.services.get((ns, name))

    def store(self, kind: str) -> dict[Key, dict]:
        """The objects of one resource, by its id (`Resource.id`)."""
        return self._stores[kind]

    def resource_id(self, obj: dict) -> str:
        """The id of the resource an object belongs to (by its apiVersion and kind)."""
        for r in self.resources.values():
            if (r.api_version, r.kind) == (obj.get("apiVersion"), obj.get("kind")):
                return r.id
        raise KeyError(f"not watched: {obj.get('apiVersion')} {obj.get('kind')}")

    def route_pool_items(self, route: dict | None) -> set[Item]:
        """Work items of the pools the route's backendRefs name, of the APIs watched."""
        return {(self.revisions[g].api.resource.id, ns, name) for g, ns, name in route_pool_refs(route)
                if g in self.revisions}

    def class_is_ours(self, gc: dict | None) -> bool:
        if not gc or spec(gc).get("controllerName") != self.controller_name:
            return False
        return self.gateway_class is None or key(gc)[1] == self.gateway_class

    def gateway_is_ours(self, gw: dict | None) -> bool:
        if not gw or terminating(gw):
            return False
        return self.class_is_ours(self.classes.get(("", spec(gw).get("gatewayClassName", ""))))
