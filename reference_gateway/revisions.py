"""Where the InferencePool APIs and their published revisions differ for a controller.

Two APIs: `inference.networking.x-k8s.io/v1alpha2` (this project's seed, GIE
v0.2 - v0.5) and the GA `inference.networking.k8s.io/v1` (GIE v1.0 - v1.6). An
`Api` knows where its pools are served and how a pool spells what the
controller reads and writes: the endpoint picker reference and ports in spec,
the list of parent entries in status. A `Revision` of an API knows how
`parentRef` is spelled, whether the CRD defaults status to a placeholder
parent, whether an entry can report a rejected route, whether entries carry
`controllerName`, and whether a pool may leave out its picker reference.
Everything API- or revision-specific the controller does goes through these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .model import GATEWAY_GROUP, INFERENCE_GA_GROUP, INFERENCE_GROUP, POOL_KIND, Key, Resource, pool_resource_id, spec

# The API says implementations SHOULD infer this port for a Service when the
# pool's reference leaves it out.
DEFAULT_PICKER_PORT = 9002


class PickerRef(NamedTuple):
    """A pool's endpoint picker reference, with the API's defaults filled in."""

    group: str
    kind: str
    name: str
    port: int


def _dig(obj: dict, path: tuple[str, ...]):
    for step in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(step)
    return obj


@dataclass(frozen=True)
class Api:
    """One InferencePool API: where it is served and how a pool spells what the controller reads."""

    group: str
    version: str
    status_key: str  # the list of parent entries in status: "parent" or "parents"
    picker_field: str  # the endpoint picker reference in spec: "extensionRef" or "endpointPickerRef"
    picker_port: tuple[str, ...]  # where the port is inside the reference: ("portNumber",) or ("port", "number")
    ports_field: str  # the pool's target ports in spec: "targetPortNumber" or "targetPorts"
    # None: `ports_field` is one port number; else the key of the number in each item of that list.
    port_number_key: str | None
    plural: str = "inferencepools"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> Resource:
        return Resource(pool_resource_id(self.group), POOL_KIND, self.group, self.version, self.plural)

    def target_ports(self, pool: dict) -> list[int]:
        value = spec(pool).get(self.ports_field)
        if self.port_number_key is None:
            return [value] if isinstance(value, int) else []
        return [p[self.port_number_key] for p in value or [] if isinstance(p, dict) and p.get(self.port_number_key)]


V1ALPHA2 = Api(INFERENCE_GROUP, "v1alpha2", status_key="parent", picker_field="extensionRef",
               picker_port=("portNumber",), ports_field="targetPortNumber", port_number_key=None)
V1 = Api(INFERENCE_GA_GROUP, "v1", status_key="parents", picker_field="endpointPickerRef",
         picker_port=("port", "number"), ports_field="targetPorts", port_number_key="number")


@dataclass(frozen=True)
class Revision:
    name: str
    api: Api
    # "object": corev1.ObjectReference {apiVersion, kind, name, namespace}
    # "parent": {group, kind, name, namespace} (group/kind defaulted by the CRD)
    ref_style: str
    # The CRD defaults status to {parent: [{parentRef: {kind: Status, name: default}, ...}]};
    # the controller removes that placeholder once it manages the pool, and puts it
    # back when it stops managing the pool and no other entry is left.
    status_placeholder: bool
    # Reason for Accepted=False on an entry whose only routes the Gateway rejected,
    # or None when the revision has no such reason (then there is no entry).
    route_not_accepted_reason: str | None
    # Parent entries have `controllerName`: the controller writes its own on every
    # entry it writes (a schema without the field would prune it).
    controller_name: bool = False
    # The pool may leave out its picker reference: nothing to resolve then.
    picker_optional: bool = False

    @property
    def status_key(self) -> str:
        return self.api.status_key

    def parents(self, pool: dict | None) -> list[dict]:
        """The pool's parent entries (a copy of the list)."""
        return list(((pool or {}).get("status") or {}).get(self.status_key) or [])

    def picker_ref(self, pool: dict) -> PickerRef | None:
        """The pool's endpoint picker reference, or None when it has none and the revision allows that.

        A missing reference where the revision requires one reads as a reference
        with an empty name (which resolves to nothing)."""
        ref = spec(pool).get(self.api.picker_field)
        if ref is None and self.picker_optional:
            return None
        ref = ref if isinstance(ref, dict) else {}
        port = _dig(ref, self.api.picker_port)
        return PickerRef(ref.get("group") or "", ref.get("kind") or "Service", ref.get("name") or "",
                         port if isinstance(port, int) and port else DEFAULT_PICKER_PORT)

    def parent_ref(self, target: dict) -> dict:
        """The parentRef naming `target` (normally the Gateway) as this revision spells it."""
        md = target["metadata"]
        api_version = target.get("apiVersion") or f"{GATEWAY_GROUP}/v1"
        if self.ref_style == "object":
            return {"apiVersion": api_version, "kind": target.get("kind") or "Gateway",
                    "name": md["name"], "namespace": md["namespace"]}
        return {"group": api_version.rpartition("/")[0], "kind": target.get("kind") or "Gateway",
                "name": md["name"], "namespace": md["namespace"]}

    def entry(self, parent_ref: dict, controller: str, conditions: list[dict]) -> dict:
        """A parent entry as this revision spells it: with `controllerName` where the schema has it."""
        out = {"parentRef": parent_ref}
        if self.controller_name:
            out["controllerName"] = controller
        out["conditions"] = conditions
        return out

    def gateway_named(self, ref: dict, pool_namespace: str) -> Key | None:
        """The Gateway an existing entry's parentRef names, or None if it names something else."""
        if self.ref_style == "object":
            group = (ref.get("apiVersion") or "").rpartition("/")[0]
            kind = ref.get("kind")
        else:
            group, kind = ref.get("group", GATEWAY_GROUP), ref.get("kind", "Gateway")
        if group != GATEWAY_GROUP or kind != "Gateway" or not ref.get("name"):
            return None
        return ref.get("namespace") or pool_namespace, ref["name"]

    def is_placeholder(self, entry: dict) -> bool:
        ref = entry.get("parentRef") or {}
        return self.status_placeholder and ref.get("kind") == "Status" and ref.get("name") == "default"

    def placeholder(self) -> dict:
        """The placeholder entry, spelled exactly as the API server stores its own default
        (the parentRef's group filled in), so writing it back is recognised as no change."""
        return {"parentRef": {"group": GATEWAY_GROUP, "kind": "Status", "name": "default"},
                "conditions": [{"type": "Accepted", "status": "Unknown", "reason": "Pending",
                                "message": "Waiting for controller",
                                "lastTransitionTime": "1970-01-01T00:00:00Z"}]}


_OBJECT_REF = dict(api=V1ALPHA2, ref_style="object", status_placeholder=False, route_not_accepted_reason=None)
# v1: parentRef {group, kind, name, namespace} like v0.5, no status default in any revision.
_GA = dict(api=V1, ref_style="parent", status_placeholder=False, route_not_accepted_reason="HTTPRouteNotAccepted")

REVISIONS: dict[str, Revision] = {
    r.name: r for r in (
        Revision("seed", **_OBJECT_REF),
        Revision("v0.2", **_OBJECT_REF),
        Revision("v0.3", **_OBJECT_REF),
        Revision("v0.4", **_OBJECT_REF),
        Revision("v0.5", api=V1ALPHA2, ref_style="parent", status_placeholder=True,
                 route_not_accepted_reason="HTTPRouteNotAccepted"),
        Revision("v1.0", **_GA),
        Revision("v1.0.2", **_GA),
        Revision("v1.1", **_GA, controller_name=True),
        Revision("v1.4", **_GA, controller_name=True),
        Revision("v1.6", **_GA, controller_name=True, picker_optional=True),
    )
}
DEFAULT = "seed"
APIS: dict[str, Api] = {a.group: a for a in (V1ALPHA2, V1)}


def revisions_by_api() -> dict[str, list[str]]:
    """API group -> the names of its revisions, oldest first."""
    out: dict[str, list[str]] = {}
    for r in REVISIONS.values():
        out.setdefault(r.api.group, []).append(r.name)
    return out


def choose(names: list[str]) -> list[Revision]:
    """The revisions named, at most one per API group (ValueError otherwise), in the order given."""
    chosen: dict[str, Revision] = {}
    for name in names:
        if name not in REVISIONS:
            raise ValueError(f"unknown API revision {name!r} (known: {', '.join(REVISIONS)})")
        rev = REVISIONS[name]
        other = chosen.get(rev.api.group)
        if other is not None and other is not rev:
            raise ValueError(f"API revisions {other.name} and {name} are both of API group {rev.api.group}; "
                             "give at most one per group")
        chosen[rev.api.group] = rev
    return list(chosen.values())
