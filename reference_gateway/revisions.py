"""Where the published revisions of InferencePool v1alpha2 differ for a controller.

The only differences that matter when writing status: how `status.parent[].parentRef`
is spelled, whether the CRD defaults status to a placeholder parent entry, and
whether a pool entry can report a rejected route. Everything revision-specific
the controller does goes through a `Revision` from `REVISIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import GATEWAY_GROUP, Key


@dataclass(frozen=True)
class Revision:
    name: str
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

    def parent_ref(self, target: dict) -> dict:
        """The parentRef naming `target` (normally the Gateway) as this revision spells it."""
        md = target["metadata"]
        api_version = target.get("apiVersion") or f"{GATEWAY_GROUP}/v1"
        if self.ref_style == "object":
            return {"apiVersion": api_version, "kind": target.get("kind") or "Gateway",
                    "name": md["name"], "namespace": md["namespace"]}
        return {"group": api_version.rpartition("/")[0], "kind": target.get("kind") or "Gateway",
                "name": md["name"], "namespace": md["namespace"]}

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


_OBJECT_REF = dict(ref_style="object", status_placeholder=False, route_not_accepted_reason=None)

REVISIONS: dict[str, Revision] = {
    r.name: r for r in (
        Revision("seed", **_OBJECT_REF),
        Revision("v0.2", **_OBJECT_REF),
        Revision("v0.3", **_OBJECT_REF),
        Revision("v0.4", **_OBJECT_REF),
        Revision("v0.5", ref_style="parent", status_placeholder=True,
                 route_not_accepted_reason="HTTPRouteNotAccepted"),
    )
}
DEFAULT = "seed"
