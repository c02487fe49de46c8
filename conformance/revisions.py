"""The one place that knows each published revision of the v1alpha2 API.

Real clusters run the InferencePool CRD of whichever GIE release they
installed. Where the expected behaviour differs between revisions, the
difference is data here (or in the case files, keyed by these names), never an
`if` in a test. `detect` reads the revision off the installed CRD's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CRD_NAME = "inferencepools.inference.networking.x-k8s.io"
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
GATEWAY_API_CRDS = MANIFESTS / "crd" / "gateway-api"


@dataclass(frozen=True)
class Revision:
    name: str
    title: str
    default_condition_type: str  # the type of the condition the CRD defaults into a parent entry
    parent_ref_shape: str  # "ObjectReference" or "ParentGatewayReference"
    status_default_parent: bool  # the CRD defaults status to one placeholder parent
    crd: Path  # the InferencePool CRD of this revision, generated from api/

    @property
    def embedded_crds(self) -> list[Path]:
        """What the embedded cluster installs for this revision: its CRD and Gateway API's."""
        return [self.crd, GATEWAY_API_CRDS]

    def gateway_parent_ref(self, name: str, namespace: str) -> dict:
        """The parentRef an implementation writes for a Gateway, as this revision spells it."""
        if self.parent_ref_shape == "ObjectReference":
            return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": name, "namespace": namespace}
        return {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name, "namespace": namespace}

    def names_gateway(self, ref: dict, name: str, namespace: str) -> bool:
        """Whether a status.parent parentRef names Gateway namespace/name, as this revision spells it."""
        if ref.get("kind") != "Gateway" or ref.get("name") != name:
            return False
        if self.parent_ref_shape == "ObjectReference":
            return ref.get("namespace") == namespace and (ref.get("apiVersion") or "").startswith(
                "gateway.networking.k8s.io/")
        return ref.get("namespace", namespace) == namespace and ref.get("group") == "gateway.networking.k8s.io"


REVISIONS: dict[str, Revision] = {
    r.name: r
    for r in (
        Revision("seed", "this project's seed API (early 2025 draft)", "Ready", "ObjectReference", False,
                 MANIFESTS / "crd" / "inference.networking.x-k8s.io_inferencepools.yaml"),
    )
}
DEFAULT = "seed"


def _v1alpha2_schema(crd: dict) -> dict | None:
    for v in crd.get("spec", {}).get("versions", []):
        if v.get("name") == "v1alpha2":
            return (v.get("schema") or {}).get("openAPIV3Schema")
    return None


def fingerprint(crd: dict) -> dict:
    """The schema facts that tell revisions apart."""
    schema = _v1alpha2_schema(crd) or {}
    status = schema.get("properties", {}).get("status", {})
    parent = status.get("properties", {}).get("parent", {})
    entry = parent.get("items", {}).get("properties", {})
    ref_props = set(entry.get("parentRef", {}).get("properties", {}))
    cond_default = entry.get("conditions", {}).get("default") or []
    return {
        "default_condition_type": cond_default[0].get("type") if cond_default else None,
        "parent_ref_shape": "ObjectReference" if "uid" in ref_props
        else ("ParentGatewayReference" if "group" in ref_props else None),
        "status_default_parent": bool(status.get("default")),
    }


def detect(crd: dict) -> Revision | None:
    """The revision whose schema the CRD has, or None when it matches none."""
    if _v1alpha2_schema(crd) is None:
        return None
    fp = fingerprint(crd)
    for rev in REVISIONS.values():
        if (rev.default_condition_type, rev.parent_ref_shape, rev.status_default_parent) == (
            fp["default_condition_type"], fp["parent_ref_shape"], fp["status_default_parent"]):
            return rev
    return None
