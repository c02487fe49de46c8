"""The objects the controller knows and how they refer to each other.

Plain dicts as the API server returns them. `World` is the read-only view
the status computations take; the cache in `cache.py` is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

INFERENCE_GROUP = "inference.networking.x-k8s.io"
GATEWAY_GROUP = "gateway.networking.k8s.io"
DEFAULT_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"

# The kinds the controller watches: kind -> apiVersion.
KINDS: dict[str, str] = {
    "GatewayClass": f"{GATEWAY_GROUP}/v1",
    "Gateway": f"{GATEWAY_GROUP}/v1",
    "HTTPRoute": f"{GATEWAY_GROUP}/v1",
    "InferencePool": f"{INFERENCE_GROUP}/v1alpha2",
    "Service": "v1",
}

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects


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


def route_pool_keys(route: dict | None) -> set[Key]:
    """Keys of the InferencePools the route's backendRefs name (in any namespace)."""
    if not route:
        return set()
    ns = key(route)[0]
    return {
        (b.get("namespace") or ns, b["name"])
        for b in route_backends(route)
        if backend_group_kind(b) == (INFERENCE_GROUP, "InferencePool")
    }


def route_service_keys(route: dict | None) -> set[Key]:
    if not route:
        return set()
    ns = key(route)[0]
    return {(b.get("namespace") or ns, b["name"]) for b in route_backends(route)
            if backend_group_kind(b) == ("", "Service")}


def extension_ref(pool: dict) -> tuple[str, str, str, int]:
    """(group, kind, name, port) of the pool's extensionRef, with the API's defaults filled in."""
    ext = spec(pool).get("extensionRef") or {}
    # Unset port: the API says implementations SHOULD infer 9002 for a Service.
    return ext.get("group") or "", ext.get("kind") or "Service", ext.get("name") or "", ext.get("portNumber") or 9002


@dataclass
class World:
    """What the controller currently knows about the cluster."""

    controller_name: str = DEFAULT_CONTROLLER
    gateway_class: str | None = None  # when set, only this class of ours is reconciled
    classes: dict[Key, dict] = field(default_factory=dict)
    gateways: dict[Key, dict] = field(default_factory=dict)
    routes: dict[Key, dict] = field(default_factory=dict)
    pools: dict[Key, dict] = field(default_factory=dict)
    services: dict[Key, dict] = field(default_factory=dict)

    def store(self, kind: str) -> dict[Key, dict]:
        return {
            "GatewayClass": self.classes, "Gateway": self.gateways, "HTTPRoute": self.routes,
            "InferencePool": self.pools, "Service": self.services,
        }[kind]

    def class_is_ours(self, gc: dict | None) -> bool:
        if not gc or spec(gc).get("controllerName") != self.controller_name:
            return False
        return self.gateway_class is None or key(gc)[1] == self.gateway_class

    def gateway_is_ours(self, gw: dict | None) -> bool:
        if not gw or terminating(gw):
            return False
        return self.class_is_ours(self.classes.get(("", spec(gw).get("gatewayClassName", ""))))
