"""`inference.networking.x-k8s.io/v1alpha2`: this project's seed and GIE v0.2 - v0.5 (and v1.0 - v1.4's copy).

The revisions differ in the condition type the CRD defaults into a status
parent (`Ready` in the seed, `Accepted` after), in how a parent entry names
its Gateway (a core ObjectReference until v0.4, `{group, kind, name,
namespace}` from v0.5) and in v0.5's status default (one placeholder parent
of kind Status). In all of them the extension reference may leave out its
port, which implementations SHOULD then take to be 9002.
"""

from __future__ import annotations

from ..data import MANIFESTS
from . import Api, Revision

API = Api(name="v1alpha2", group="inference.networking.x-k8s.io", version="v1alpha2", status_key="parent",
          picker_field="extensionRef", title="InferencePool inference.networking.x-k8s.io/v1alpha2")


def _crd(revision: str | None):
    folder = MANIFESTS / "crd" if revision is None else MANIFESTS / "crd" / "revisions" / revision
    return folder / API.crd_file


REVISIONS = (
    Revision(name="seed", title="this project's seed API (early 2025 draft)", api=API,
             default_condition_type="Ready", parent_ref_shape="ObjectReference",
             crd=_crd(None), extension_version="v0.0.0-seed", picker_port_default=True),
    Revision(name="v0.2", title="GIE v0.2.0 - v0.4.0", api=API,
             default_condition_type="Accepted", parent_ref_shape="ObjectReference",
             crd=_crd("v0.2"), extension_version="v0.2.0", picker_port_default=True),
    Revision(name="v0.5", title="GIE v0.5.x", api=API,
             default_condition_type="Accepted", parent_ref_shape="ParentGatewayReference",
             status_default_parent=True, crd=_crd("v0.5"), extension_version="v0.5.0",
             picker_port_default=True),
)


def fingerprint(schema: dict) -> dict:
    """The schema facts that tell the v1alpha2 revisions apart."""
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


FINGERPRINTS = {r.name: {"default_condition_type": r.default_condition_type, "parent_ref_shape": r.parent_ref_shape,
                         "status_default_parent": r.status_default_parent} for r in REVISIONS}
