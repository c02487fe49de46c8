"""The one place that knows each published revision of the v1alpha2 API.

Real clusters run the InferencePool CRD of whichever GIE release they
installed. Where the expected behaviour differs between revisions, the
difference is data here (or in the case files, keyed by these names), never an
`if` in a test. `detect` reads the revision off the installed CRD's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .data import MANIFESTS

CRD_NAME = "inferencepools.inference.networking.x-k8s.io"
# How the skip reason of a test (or schema case) that the API revision in use
# does not have begins: like not-supported, it says nothing about the implementation.
NOT_APPLICABLE_PREFIX = "not-applicable:"
GATEWAY_API_CRDS = MANIFESTS / "crd" / "gateway-api"


GATEWAY_GROUP = "gateway.networking.k8s.io"
# The fields, other than type, of the condition a CRD defaults into a status
# parent written without conditions (all revisions agree on these).
_DEFAULT_CONDITION = {"status": "Unknown", "reason": "Pending", "message": "Waiting for controller",
                      "lastTransitionTime": "1970-01-01T00:00:00Z"}


@dataclass(frozen=True)
class Revision:
    name: str
    title: str
    default_condition_type: str  # the type of the condition the CRD defaults into a parent entry
    parent_ref_shape: str  # "ObjectReference" or "ParentGatewayReference"
    status_default_parent: bool  # the CRD defaults status to one placeholder parent (kind Status, name default)
    crd: Path  # the InferencePool CRD of this revision, generated from api/
    # What a ConformanceReport names as GatewayAPIInferenceExtensionVersion (and the
    # reports/<version>/ folder): the oldest GIE release with this CRD schema (the
    # schema cannot tell later releases of a revision apart). The seed is no
    # release, so it gets a SemVer pre-release of v0.0.0 that says so.
    extension_version: str

    @property
    def embedded_crds(self) -> list[Path]:
        """What the embedded cluster installs for this revision: its CRD and Gateway API's."""
        return [self.crd, GATEWAY_API_CRDS]

    @property
    def default_conditions(self) -> list[dict]:
        """The conditions the CRD gives a status parent written without any."""
        return [{"type": self.default_condition_type, **_DEFAULT_CONDITION}]

    @property
    def default_parent(self) -> dict | None:
        """The placeholder parent entry of a pool no controller wrote status for, as the server reads
        it back (the parentRef's group is filled in by the parentRef's own default), or None."""
        if not self.status_default_parent:
            return None
        return {"parentRef": {"group": GATEWAY_GROUP, "kind": "Status", "name": "default"},
                "conditions": self.default_conditions}

    @property
    def fresh_parents(self) -> list[dict]:
        """status.parent of a pool no controller has written status for."""
        return [self.default_parent] if self.status_default_parent else []

    def is_default_parent(self, entry: dict) -> bool:
        """Whether a status.parent entry is this revision's placeholder (never an implementation's entry)."""
        ref = entry.get("parentRef") or {}
        return self.status_default_parent and ref.get("kind") == "Status" and ref.get("name") == "default"

    def gateway_parent_ref(self, name: str, namespace: str) -> dict:
        """The parentRef an implementation writes for a Gateway, as this revision spells it."""
        if self.parent_ref_shape == "ObjectReference":
            return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "Gateway", "name": name, "namespace": namespace}
        return {"group": GATEWAY_GROUP, "kind": "Gateway", "name": name, "namespace": namespace}

    def parent_ref_differences(self, ref: dict, name: str, namespace: str) -> list[str]:
        """Each field in which a status.parent parentRef differs from one naming Gateway namespace/name,
        as `parentRef.<field> <seen> where the rule wants <wanted>`; empty when it names that Gateway."""
        def show(v):
            return "absent" if v is None else repr(v)

        out = []
        if self.parent_ref_shape == "ObjectReference":
            api_version = ref.get("apiVersion")
            if not (api_version or "").startswith(f"{GATEWAY_GROUP}/"):
                out.append(f"parentRef.apiVersion {show(api_version)} where the rule wants {GATEWAY_GROUP}/<version>")
            seen_ns = ref.get("namespace")
        else:
            if ref.get("group") != GATEWAY_GROUP:
                out.append(f"parentRef.group {show(ref.get('group'))} where the rule wants {GATEWAY_GROUP!r}")
            # Left out, the namespace is the pool's own (where the suite's Gateways are).
            seen_ns = ref.get("namespace", namespace)
        for field, seen, wanted in (("kind", ref.get("kind"), "Gateway"), ("name", ref.get("name"), name),
                                    ("namespace", seen_ns, namespace)):
            if seen != wanted:
                out.append(f"parentRef.{field} {show(seen)} where the rule wants {wanted!r}")
        return out

    def names_gateway(self, ref: dict, name: str, namespace: str) -> bool:
        """Whether a status.parent parentRef names Gateway namespace/name, as this revision spells it."""
        return not self.parent_ref_differences(ref, name, namespace)


_CRD_FILE = "inference.networking.x-k8s.io_inferencepools.yaml"

REVISIONS: dict[str, Revision] = {
    r.name: r
    for r in (
        Revision(name="seed", title="this project's seed API (early 2025 draft)",
                 default_condition_type="Ready", parent_ref_shape="ObjectReference", status_default_parent=False,
                 crd=MANIFESTS / "crd" / _CRD_FILE, extension_version="v0.0.0-seed"),
        Revision(name="v0.2", title="GIE v0.2.0 - v0.4.0",
                 default_condition_type="Accepted", parent_ref_shape="ObjectReference", status_default_parent=False,
                 crd=MANIFESTS / "crd" / "revisions" / "v0.2" / _CRD_FILE, extension_version="v0.2.0"),
        Revision(name="v0.5", title="GIE v0.5.x",
                 default_condition_type="Accepted", parent_ref_shape="ParentGatewayReference",
                 status_default_parent=True, crd=MANIFESTS / "crd" / "revisions" / "v0.5" / _CRD_FILE,
                 extension_version="v0.5.0"),
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


def describe(fp: dict) -> str:
    """A fingerprint in words, for the line that names an installed CRD no revision matches."""
    return (f"conditions default {fp['default_condition_type'] or 'none'}, "
            f"parentRef {fp['parent_ref_shape'] or 'of unknown shape'}, "
            f"{'a' if fp['status_default_parent'] else 'no'} status default parent")


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
