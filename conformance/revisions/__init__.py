"""The one place that knows each InferencePool API and each of its published revisions.

Real clusters run the InferencePool CRD of whichever GIE release they
installed, of one API or of both: `inference.networking.x-k8s.io/v1alpha2`
(this project's seed, GIE v0.2 - v0.5, and the copy in v1.0 - v1.4) and the GA
API `inference.networking.k8s.io/v1` (GIE v1.0 - v1.6). An `Api` knows how its
group spells a pool (field names and shapes); a `Revision` knows what one
schema revision of an API defaults, allows and which rules it has. Where the
expected behaviour differs, the difference is data here (one module per API:
`v1alpha2.py`, `v1.py`) or in the case files keyed by revision names, never an
`if` in a test. `detect` reads the revision off an installed CRD's schema.

Adding a revision is one `Revision` entry in its API's module plus its case
data (manifests/schema/<api>/); no test changes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from ..data import MANIFESTS

# How the skip reason of a test (or schema case) that the API revision in use
# does not have begins: like not-supported, it says nothing about the implementation.
NOT_APPLICABLE_PREFIX = "not-applicable:"
GATEWAY_API_CRDS = MANIFESTS / "crd" / "gateway-api"
GATEWAY_GROUP = "gateway.networking.k8s.io"
BUNDLE_VERSION_ANNOTATION = "inference.networking.k8s.io/bundle-version"


def _show(v) -> str:
    return "absent" if v is None else repr(v)


@dataclass(frozen=True)
class Api:
    """One InferencePool API (a group and version): how it spells a pool.

    Status topologies (manifests/status/) write pools in the GA API's shape;
    `spell_pool` turns such a pool into this API's own.
    """

    name: str  # "v1alpha2" or "v1": how test ids, results and options name the API
    group: str
    version: str
    status_key: str  # the list of parent entries in status: "parent" or "parents"
    picker_field: str  # the endpoint picker reference in spec: "extensionRef" or "endpointPickerRef"
    title: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"inferencepools.{self.group}"

    @property
    def crd_file(self) -> str:
        return f"{self.group}_inferencepools.yaml"

    @property
    def schema_cases(self) -> Path:
        """The folder of this API's schema and defaulting cases."""
        return MANIFESTS / "schema" / self.name

    def spell_pool(self, pool: dict) -> dict:
        """A pool written in the GA API's shape, as this API spells it (a copy; the GA API's is unchanged)."""
        pool = copy.deepcopy(pool)
        pool["apiVersion"] = self.api_version
        if self.picker_field == "endpointPickerRef":
            return pool
        spec = pool.get("spec") or {}
        if "selector" in spec:
            spec["selector"] = (spec["selector"] or {}).get("matchLabels", {})
        if "targetPorts" in spec:
            spec["targetPortNumber"] = spec.pop("targetPorts")[0]["number"]
        if "endpointPickerRef" in spec:
            ref = spec.pop("endpointPickerRef")
            port = ref.pop("port", None)
            if port is not None:
                ref["portNumber"] = port["number"]
            spec["extensionRef"] = ref
        return pool

    def target_port_patch(self, port: int) -> dict:
        """A merge patch that sets the pool's one target port."""
        return {"spec": self.spell_pool({"spec": {"targetPorts": [{"number": port}]}})["spec"]}

    def parents(self, pool: dict | None) -> list[dict]:
        """The pool's status parent entries (empty when there are none)."""
        return ((pool or {}).get("status") or {}).get(self.status_key) or []


@dataclass(frozen=True)
class Revision:
    """One schema revision of an API: what the API server and an implementation must do with it."""

    name: str
    title: str
    api: Api
    parent_ref_shape: str  # "ObjectReference" or "ParentGatewayReference"
    # What a ConformanceReport names as GatewayAPIInferenceExtensionVersion (and the
    # reports/<version>/ folder): the oldest GIE release with this CRD schema (the
    # schema cannot tell later releases of a revision apart; an installed CRD's
    # bundle-version annotation can). The seed is no release, so it gets a SemVer
    # pre-release of v0.0.0 that says so.
    extension_version: str
    crd: Path  # the InferencePool CRD of this revision, generated from api/
    default_condition_type: str | None = None  # the condition type the CRD defaults into a parent entry
    status_default_parent: bool = False  # the CRD defaults status to one placeholder parent (kind Status)
    # Fields and rules only some revisions have (a test declares which it needs
    # with the `api_revision_has` marker; elsewhere it is not-applicable).
    picker_ref_optional: bool = False  # a pool may leave out its endpoint picker reference (C15)
    controller_name: bool = False  # parent entries have controllerName (C16, S17)
    multiple_target_ports: bool = False  # targetPorts takes up to 8 unique ports, data parallelism (T8)
    bounded_match_labels: bool = False  # selector.matchLabels takes 1 to 64 entries (S16)
    app_protocol: bool = False  # spec.appProtocol: http or kubernetes.io/h2c (T8, S14, D8)
    # The picker reference may leave out its port; a gateway SHOULD then use 9002 (T8, D4: reported).
    picker_port_default: bool = False

    @property
    def embedded_crds(self) -> list[Path]:
        """What the embedded cluster installs for this revision: its CRD and Gateway API's."""
        return [self.crd, GATEWAY_API_CRDS]

    @property
    def default_conditions(self) -> list[dict]:
        """The conditions the CRD gives a status parent written without any."""
        if self.default_condition_type is None:
            return []
        return [{"type": self.default_condition_type, "status": "Unknown", "reason": "Pending",
                 "message": "Waiting for controller", "lastTransitionTime": "1970-01-01T00:00:00Z"}]

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
        """The status parent list of a pool no controller has written status for."""
        return [self.default_parent] if self.status_default_parent else []

    def is_default_parent(self, entry: dict) -> bool:
        """Whether a status parent entry is this revision's placeholder (never an implementation's entry)."""
        ref = entry.get("parentRef") or {}
        return self.status_default_parent and ref.get("kind") == "Status" and ref.get("name") == "default"

    def gateway_parent_ref(self, name: str, namespace: str) -> dict:
        """The parentRef an implementation writes for a Gateway, as this revision spells it."""
        if self.parent_ref_shape == "ObjectReference":
            return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "Gateway", "name": name, "namespace": namespace}
        return {"group": GATEWAY_GROUP, "kind": "Gateway", "name": name, "namespace": namespace}

    def parent_ref_differences(self, ref: dict, name: str, namespace: str,
                               pool_namespace: str | None = None) -> list[str]:
        """Each field in which a status parent's parentRef differs from one naming Gateway namespace/name,
        as `parentRef.<field> <seen> where the rule wants <wanted>`; empty when it names that Gateway.

        A ParentGatewayReference without a namespace names a Gateway of the pool's
        own namespace (`pool_namespace`, by default the Gateway's)."""
        out = []
        if self.parent_ref_shape == "ObjectReference":
            api_version = ref.get("apiVersion")
            if not (api_version or "").startswith(f"{GATEWAY_GROUP}/"):
                out.append(f"parentRef.apiVersion {_show(api_version)} where the rule wants {GATEWAY_GROUP}/<version>")
            seen_ns = ref.get("namespace")
        else:
            if ref.get("group") != GATEWAY_GROUP:
                out.append(f"parentRef.group {_show(ref.get('group'))} where the rule wants {GATEWAY_GROUP!r}")
            seen_ns = ref.get("namespace", pool_namespace or namespace)
        for field_, seen, wanted in (("kind", ref.get("kind"), "Gateway"), ("name", ref.get("name"), name),
                                     ("namespace", seen_ns, namespace)):
            if seen != wanted:
                out.append(f"parentRef.{field_} {_show(seen)} where the rule wants {wanted!r}")
        return out

    def names_gateway(self, ref: dict, name: str, namespace: str) -> bool:
        """Whether a status parent's parentRef names Gateway namespace/name, as this revision spells it."""
        return not self.parent_ref_differences(ref, name, namespace)


from . import v1, v1alpha2  # noqa: E402  (the API modules build on the classes above)

APIS: dict[str, Api] = {a.name: a for a in (v1alpha2.API, v1.API)}
REVISIONS: dict[str, Revision] = {r.name: r for r in (*v1alpha2.REVISIONS, *v1.REVISIONS)}
# What the embedded cluster installs and judges when no --api-revision is given:
# the seed (the mission's API) and the newest GA revision (what users ship).
DEFAULTS: tuple[str, ...] = ("seed", "v1.6")
DEFAULT = DEFAULTS[0]
CRD_NAME = v1alpha2.API.crd_name  # the v1alpha2 CRD's name (tools that swap it)


def revisions_of(api: Api) -> list[Revision]:
    """The revisions of one API, oldest first."""
    return [r for r in REVISIONS.values() if r.api is api]


def api_of_crd(crd: dict) -> Api | None:
    """The API an InferencePool CRD serves, or None when it is none of ours."""
    group = (crd.get("spec") or {}).get("group")
    return next((a for a in APIS.values() if a.group == group), None)


def _schema(crd: dict, version: str) -> dict | None:
    for v in (crd.get("spec") or {}).get("versions", []):
        if v.get("name") == version:
            return (v.get("schema") or {}).get("openAPIV3Schema")
    return None


def fingerprint(crd: dict) -> dict:
    """The schema facts that tell the revisions of the CRD's API apart."""
    api = api_of_crd(crd) or v1alpha2.API
    module = v1 if api is v1.API else v1alpha2
    return module.fingerprint(_schema(crd, api.version) or {})


def describe(fp: dict) -> str:
    """A fingerprint in words, for the line that names an installed CRD no revision matches."""
    return ", ".join(f"{k.replace('_', ' ')} {v if v is not None else 'none'}" for k, v in fp.items())


def detect(crd: dict) -> Revision | None:
    """The revision whose schema the CRD has, or None when it matches none."""
    api = api_of_crd(crd) or v1alpha2.API
    if _schema(crd, api.version) is None:
        return None
    fp = fingerprint(crd)
    module = v1 if api is v1.API else v1alpha2
    return next((r for r in revisions_of(api) if module.FINGERPRINTS[r.name] == fp), None)


def bundle_version(crd: dict) -> str | None:
    """The GIE release an upstream CRD names in its bundle-version annotation, if any."""
    return ((crd.get("metadata") or {}).get("annotations") or {}).get(BUNDLE_VERSION_ANNOTATION)
