"""The v1 InferencePool CRDs (manifests/crd/revisions/v1.*), judged by a real API server.

Each CRD generated from api/revisions/v1_*/v1 is installed on an embedded
cluster (one cluster for the module; the CRD is replaced per revision) and
every validation, CEL rule and default that SPEC section 8 gives that revision
is checked by requests. What differs between revisions is the data in
V1_REVISIONS; each case says what it expects from those facts.

A rejection is judged by HTTP status and one of its causes (field path and
cause type), never by message text. Note that the API server skips the CEL
rules of an object that fails any other schema check, so each CEL case is
otherwise valid.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import ApiError, Kube

V1_GROUP = "inference.networking.k8s.io"
API_VERSION = f"{V1_GROUP}/v1"
CRD_NAME = f"inferencepools.{V1_GROUP}"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
GROUP_VERSION_PATH = f"/apis/{API_VERSION}"
BUNDLE_ANNOTATION = f"{V1_GROUP}/bundle-version"
REVISIONS_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crd" / "revisions"
NAMESPACE = "v1-crds"
POOLS = f"{GROUP_VERSION_PATH}/namespaces/{NAMESPACE}/inferencepools"
INSTALL_TIMEOUT = 60.0


@dataclass(frozen=True)
class V1Revision:
    """What SPEC section 8 says sets one v1 schema revision apart."""

    name: str  # directory under manifests/crd/revisions
    bundle_version: str  # the oldest release of the revision, in the CRD's annotation
    max_ports: int  # spec.targetPorts maxItems
    unique_ports: bool  # targetPorts carries the "port number must be unique" rule
    bounded_labels: bool  # selector.matchLabels needs 1..64 entries
    app_protocol: bool  # spec.appProtocol exists (enum, default http)
    epp_required: bool  # spec.endpointPickerRef is required
    controller_name: bool  # status.parents[].controllerName exists

    @property
    def crd_file(self) -> Path:
        return REVISIONS_DIR / self.name / f"{V1_GROUP}_inferencepools.yaml"


V1_REVISIONS = (
    V1Revision("v1.0", "v1.0.0", max_ports=1, unique_ports=False, bounded_labels=False, app_protocol=False,
               epp_required=True, controller_name=False),
    V1Revision("v1.0.2", "v1.0.2", max_ports=1, unique_ports=False, bounded_labels=True, app_protocol=False,
               epp_required=True, controller_name=False),
    V1Revision("v1.1", "v1.1.0", max_ports=8, unique_ports=True, bounded_labels=True, app_protocol=False,
               epp_required=True, controller_name=True),
    V1Revision("v1.4", "v1.4.0", max_ports=8, unique_ports=True, bounded_labels=True, app_protocol=True,
               epp_required=True, controller_name=True),
    V1Revision("v1.6", "v1.6.0", max_ports=8, unique_ports=True, bounded_labels=True, app_protocol=True,
               epp_required=False, controller_name=True),
)

# -- expectations ---------------------------------------------------------------------

REQUIRED, INVALID, NOT_SUPPORTED = "FieldValueRequired", "FieldValueInvalid", "FieldValueNotSupported"
TOO_LONG, TOO_MANY, DUPLICATE, TYPE_INVALID = ("FieldValueTooLong", "FieldValueTooMany", "FieldValueDuplicate",
                                               "FieldValueTypeInvalid")


@dataclass(frozen=True)
class Accepted:
    """The write succeeds; `path` (if given) reads back as `value`, or is absent when `absent`."""

    path: str = ""
    value: Any = None
    absent: bool = False


@dataclass(frozen=True)
class Rejected:
    """The write fails with 422 and a cause of type `reason` at `field`."""

    field: str
    reason: str


OK = Accepted()


def Pruned(path: str) -> Accepted:  # noqa: N802 - reads as an expectation, like Accepted/Rejected
    """An unknown field: the write succeeds and the field is dropped."""
    return Accepted(path, absent=True)


def _walk(obj: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path; list indices are numbers."""
    cur = obj
    for step in path.split("."):
        if isinstance(cur, list) and step.isdigit() and int(step) < len(cur):
            cur = cur[int(step)]
        elif isinstance(cur, dict) and step in cur:
            cur = cur[step]
        else:
            return False, None
    return True, cur


def _parent(obj: dict, path: str) -> tuple[Any, str | int]:
    *head, last = path.split(".")
    cur = obj
    for step in head:
        cur = cur[int(step)] if isinstance(cur, list) else cur.setdefault(step, {})
    return cur, int(last) if isinstance(cur, list) else last


def setp(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(obj: dict) -> None:
        container, key = _parent(obj, path)
        container[key] = copy.deepcopy(value)
    return mutate


def delp(path: str) -> Callable[[dict], None]:
    def mutate(obj: dict) -> None:
        container, key = _parent(obj, path)
        del container[key]
    return mutate


def ports(*numbers: int) -> list[dict]:
    return [{"number": n} for n in numbers]


@dataclass(frozen=True)
class Case:
    name: str
    rule: str  # the SPEC rule it checks
    mutate: Callable[[dict], None]
    expect: Callable[[V1Revision], Accepted | Rejected]


EPR = "spec.endpointPickerRef"
ML = "spec.selector.matchLabels"

SPEC_CASES = [
    Case("valid", "S13", lambda o: None, lambda r: OK),
    Case("spec missing", "S1", delp("spec"), lambda r: Rejected("spec", REQUIRED)),
    # S1 / S16: selector.matchLabels
    Case("selector missing", "S1", delp("spec.selector"), lambda r: Rejected("spec.selector", REQUIRED)),
    Case("matchLabels missing", "S1", setp("spec.selector", {}), lambda r: Rejected(ML, REQUIRED)),
    Case("matchLabels empty", "S16", setp(ML, {}),
         lambda r: Rejected(ML, INVALID) if r.bounded_labels else Accepted(ML, {})),
    Case("matchLabels 64 entries", "S16", setp(ML, {f"k{i}": "v" for i in range(64)}), lambda r: OK),
    Case("matchLabels 65 entries", "S16", setp(ML, {f"k{i}": "v" for i in range(65)}),
         lambda r: Rejected(ML, TOO_MANY) if r.bounded_labels else OK),
    Case("label value 63 chars", "S1", setp(f"{ML}.app", "v" * 63), lambda r: OK),
    Case("label value 64 chars", "S1", setp(f"{ML}.app", "v" * 64), lambda r: Rejected(f"{ML}.app", TOO_LONG)),
    Case("label value with a space", "S1", setp(f"{ML}.app", "bad value"),
         lambda r: Rejected(f"{ML}.app", INVALID)),
    # S13: targetPorts
    Case("targetPorts missing", "S13", delp("spec.targetPorts"), lambda r: Rejected("spec.targetPorts", REQUIRED)),
    Case("targetPorts empty", "S13", setp("spec.targetPorts", []), lambda r: Rejected("spec.targetPorts", INVALID)),
    Case("two distinct targetPorts", "S13", setp("spec.targetPorts", ports(8000, 8001)),
         lambda r: OK if r.max_ports >= 2 else Rejected("spec.targetPorts", TOO_MANY)),
    Case("eight distinct targetPorts", "S13", setp("spec.targetPorts", ports(*range(8000, 8008))),
         lambda r: OK if r.max_ports >= 8 else Rejected("spec.targetPorts", TOO_MANY)),
    Case("nine distinct targetPorts", "S13", setp("spec.targetPorts", ports(*range(8000, 8009))),
         lambda r: Rejected("spec.targetPorts", TOO_MANY)),
    # Before v1.1 maxItems 1 refuses a repeated port; from v1.1 the CEL rule does.
    Case("repeated targetPort", "S13", setp("spec.targetPorts", ports(8000, 8000)),
         lambda r: Rejected("spec.targetPorts", INVALID if r.unique_ports else TOO_MANY)),
    Case("repeated targetPort among others", "S13", setp("spec.targetPorts", ports(8000, 8001, 8000)),
         lambda r: Rejected("spec.targetPorts", INVALID if r.unique_ports else TOO_MANY)),
    Case("targetPort without number", "S13", setp("spec.targetPorts", [{}]),
         lambda r: Rejected("spec.targetPorts[0].number", REQUIRED)),
    Case("targetPort 1", "S12", setp("spec.targetPorts", ports(1)), lambda r: OK),
    Case("targetPort 65535", "S12", setp("spec.targetPorts", ports(65535)), lambda r: OK),
    Case("targetPort 0", "S13", setp("spec.targetPorts", ports(0)),
         lambda r: Rejected("spec.targetPorts[0].number", INVALID)),
    Case("targetPort 65536", "S13", setp("spec.targetPorts", ports(65536)),
         lambda r: Rejected("spec.targetPorts[0].number", INVALID)),
    Case("targetPort as a string", "S13", setp("spec.targetPorts", [{"number": "8000"}]),
         lambda r: Rejected("spec.targetPorts[0].number", TYPE_INVALID)),
    # S14 / D8: appProtocol (an unknown field before v1.4, so pruned)
    Case("appProtocol h2c", "S14", setp("spec.appProtocol", "kubernetes.io/h2c"),
         lambda r: Accepted("spec.appProtocol", "kubernetes.io/h2c") if r.app_protocol else Pruned("spec.appProtocol")),
    Case("appProtocol http", "S14", setp("spec.appProtocol", "http"),
         lambda r: Accepted("spec.appProtocol", "http") if r.app_protocol else Pruned("spec.appProtocol")),
    Case("appProtocol grpc", "S14", setp("spec.appProtocol", "grpc"),
         lambda r: Rejected("spec.appProtocol", NOT_SUPPORTED) if r.app_protocol else Pruned("spec.appProtocol")),
    Case("appProtocol left out", "D8", lambda o: None,
         lambda r: Accepted("spec.appProtocol", "http") if r.app_protocol else Pruned("spec.appProtocol")),
    # S3 / S15: endpointPickerRef
    Case("endpointPickerRef missing", "S15", delp(EPR),
         lambda r: Rejected(EPR, REQUIRED) if r.epp_required else Accepted(EPR, absent=True)),
    Case("endpointPickerRef without port", "S15", delp(f"{EPR}.port"), lambda r: Rejected(EPR, INVALID)),
    Case("endpointPickerRef kind Service without port", "S15",
         lambda o: (setp(f"{EPR}.kind", "Service")(o), delp(f"{EPR}.port")(o)), lambda r: Rejected(EPR, INVALID)),
    Case("endpointPickerRef of another kind without port", "S15",
         setp(EPR, {"group": "example.com", "kind": "Picker", "name": "epp"}),
         lambda r: Accepted(f"{EPR}.kind", "Picker")),
    Case("endpointPickerRef of another kind with port", "S15",
         setp(EPR, {"group": "example.com", "kind": "Picker", "name": "epp", "port": {"number": 9002}}),
         lambda r: Accepted(f"{EPR}.port.number", 9002)),
    Case("endpointPickerRef port without number", "S7", setp(f"{EPR}.port", {}),
         lambda r: Rejected(f"{EPR}.port.number", REQUIRED)),
    Case("endpointPickerRef port 0", "S7", setp(f"{EPR}.port.number", 0),
         lambda r: Rejected(f"{EPR}.port.number", INVALID)),
    Case("endpointPickerRef port 65536", "S7", setp(f"{EPR}.port.number", 65536),
         lambda r: Rejected(f"{EPR}.port.number", INVALID)),
    Case("endpointPickerRef port 65535", "S12", setp(f"{EPR}.port.number", 65535),
         lambda r: Accepted(f"{EPR}.port.number", 65535)),
    Case("endpointPickerRef name missing", "S4", delp(f"{EPR}.name"), lambda r: Rejected(f"{EPR}.name", REQUIRED)),
    Case("endpointPickerRef name empty", "S4", setp(f"{EPR}.name", ""), lambda r: Rejected(f"{EPR}.name", INVALID)),
    Case("endpointPickerRef name 253 chars", "S12", setp(f"{EPR}.name", "e" * 253), lambda r: OK),
    Case("endpointPickerRef name 254 chars", "S4", setp(f"{EPR}.name", "e" * 254),
         lambda r: Rejected(f"{EPR}.name", TOO_LONG)),
    Case("endpointPickerRef group invalid", "S5", setp(f"{EPR}.group", "Not_A.Group"),
         lambda r: Rejected(f"{EPR}.group", INVALID)),
    Case("endpointPickerRef group 254 chars", "S5", setp(f"{EPR}.group", "g" * 254),
         lambda r: Rejected(f"{EPR}.group", TOO_LONG)),
    Case("endpointPickerRef group empty kept", "D6", setp(f"{EPR}.group", ""), lambda r: Accepted(f"{EPR}.group", "")),
    Case("endpointPickerRef kind invalid", "S6", setp(f"{EPR}.kind", "1Service"),
         lambda r: Rejected(f"{EPR}.kind", INVALID)),
    Case("endpointPickerRef kind 63 chars", "S12", setp(f"{EPR}.kind", "K" * 63),
         lambda r: Accepted(f"{EPR}.kind", "K" * 63)),
    Case("endpointPickerRef kind 64 chars", "S6", setp(f"{EPR}.kind", "K" * 64),
         lambda r: Rejected(f"{EPR}.kind", TOO_LONG)),
    Case("endpointPickerRef kind empty", "S6", setp(f"{EPR}.kind", ""), lambda r: Rejected(f"{EPR}.kind", INVALID)),
    Case("failureMode unknown", "S8", setp(f"{EPR}.failureMode", "FailSometimes"),
         lambda r: Rejected(f"{EPR}.failureMode", NOT_SUPPORTED)),
    Case("failureMode FailOpen kept", "D6", setp(f"{EPR}.failureMode", "FailOpen"),
         lambda r: Accepted(f"{EPR}.failureMode", "FailOpen")),
    Case("failureMode defaults to FailClose", "D3", lambda o: None,
         lambda r: Accepted(f"{EPR}.failureMode", "FailClose")),
    Case("group defaults to empty", "D1", lambda o: None, lambda r: Accepted(f"{EPR}.group", "")),
    Case("kind defaults to Service", "D2", lambda o: None, lambda r: Accepted(f"{EPR}.kind", "Service")),
    Case("port is not defaulted", "D4",
         setp(EPR, {"group": "example.com", "kind": "Picker", "name": "epp"}),
         lambda r: Accepted(f"{EPR}.port", absent=True)),
    Case("status is not defaulted", "D9", lambda o: None, lambda r: Accepted("status.parents", absent=True)),
]

PARENTS = "status.parents"


def parent(name: str = "gw", **extra: Any) -> dict:
    return {"parentRef": {"name": name, "namespace": "gateways"}, **extra}


def condition(type_: str, status: str = "True") -> dict:
    return {"type": type_, "status": status, "reason": "Testing", "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z"}


STATUS_CASES = [
    Case("one parent", "D9", setp(PARENTS, [parent()]),
         lambda r: Accepted(f"{PARENTS}.0.parentRef", {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                        "name": "gw", "namespace": "gateways"})),
    Case("parent without conditions gets none", "D9", setp(PARENTS, [parent()]),
         lambda r: Accepted(f"{PARENTS}.0.conditions", absent=True)),
    Case("no parents", "D9", setp(PARENTS, []), lambda r: OK),
    Case("32 parents", "S9", setp(PARENTS, [parent(f"gw{i}") for i in range(32)]), lambda r: OK),
    Case("33 parents", "S9", setp(PARENTS, [parent(f"gw{i}") for i in range(33)]),
         lambda r: Rejected(PARENTS, TOO_MANY)),
    Case("parent without parentRef", "S9", setp(PARENTS, [{"conditions": [condition("Accepted")]}]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef", REQUIRED)),
    Case("parentRef without name", "S9", setp(PARENTS, [{"parentRef": {"namespace": "gateways"}}]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef.name", REQUIRED)),
    Case("parentRef name 254 chars", "S9", setp(PARENTS, [parent("g" * 254)]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef.name", TOO_LONG)),
    Case("parentRef group and kind kept", "D6",
         setp(PARENTS, [{"parentRef": {"group": "example.com", "kind": "Mesh", "name": "m"}}]),
         lambda r: Accepted(f"{PARENTS}.0.parentRef.kind", "Mesh")),
    Case("parentRef without namespace", "S17", setp(PARENTS, [{"parentRef": {"name": "gw"}}]),
         lambda r: Accepted(f"{PARENTS}.0.parentRef.namespace", absent=True)),
    Case("parentRef namespace not a DNS label", "S17",
         setp(PARENTS, [{"parentRef": {"name": "gw", "namespace": "Bad_Namespace"}}]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef.namespace", INVALID)),
    Case("parentRef namespace empty", "S17", setp(PARENTS, [{"parentRef": {"name": "gw", "namespace": ""}}]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef.namespace", INVALID)),
    Case("parentRef namespace 63 chars", "S17",
         setp(PARENTS, [{"parentRef": {"name": "gw", "namespace": "n" * 63}}]), lambda r: OK),
    Case("parentRef namespace 64 chars", "S17",
         setp(PARENTS, [{"parentRef": {"name": "gw", "namespace": "n" * 64}}]),
         lambda r: Rejected(f"{PARENTS}[0].parentRef.namespace", TOO_LONG)),
    Case("8 conditions", "S9", setp(PARENTS, [parent(conditions=[condition(f"T{i}") for i in range(8)])]),
         lambda r: OK),
    Case("9 conditions", "S9", setp(PARENTS, [parent(conditions=[condition(f"T{i}") for i in range(9)])]),
         lambda r: Rejected(f"{PARENTS}[0].conditions", TOO_MANY)),
    Case("two conditions of one type", "S9",
         setp(PARENTS, [parent(conditions=[condition("Accepted"), condition("Accepted", "False")])]),
         lambda r: Rejected(f"{PARENTS}[0].conditions[1]", DUPLICATE)),
    Case("condition status Maybe", "S9", setp(PARENTS, [parent(conditions=[condition("Accepted", "Maybe")])]),
         lambda r: Rejected(f"{PARENTS}[0].conditions[0].status", NOT_SUPPORTED)),
    Case("controllerName", "S17", setp(PARENTS, [parent(controllerName="example.com/gateway-controller")]),
         lambda r: (Accepted(f"{PARENTS}.0.controllerName", "example.com/gateway-controller") if r.controller_name
                    else Pruned(f"{PARENTS}.0.controllerName"))),
    Case("controllerName without a path", "S17", setp(PARENTS, [parent(controllerName="example.com")]),
         lambda r: (Rejected(f"{PARENTS}[0].controllerName", INVALID) if r.controller_name
                    else Pruned(f"{PARENTS}.0.controllerName"))),
    Case("controllerName empty", "S17", setp(PARENTS, [parent(controllerName="")]),
         lambda r: (Rejected(f"{PARENTS}[0].controllerName", INVALID) if r.controller_name
                    else Pruned(f"{PARENTS}.0.controllerName"))),
]


def base_pool(name: str) -> dict:
    return {
        "apiVersion": API_VERSION, "kind": "InferencePool",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": "model-server"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
        },
    }


_names = itertools.count()


def fresh_name() -> str:
    return f"pool-{next(_names)}"


# -- installing one revision's CRD ------------------------------------------------------


def _served(kube: Kube) -> bool:
    try:
        body = kube.request("GET", GROUP_VERSION_PATH, timeout=(5, 5))
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    return any(r.get("name") == "inferencepools" for r in (body or {}).get("resources") or [])


def _get_crd(kube: Kube) -> dict | None:
    try:
        return kube.request("GET", CRD_PATH)
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def _poll(what: str, ready: Callable[[], bool]) -> None:
    deadline, delay = time.monotonic() + INSTALL_TIMEOUT, 0.02
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {INSTALL_TIMEOUT:.0f}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def _settled(crd: dict | None) -> bool:
    """Established, and judged by the API approval controller (which sets its condition on its own time)."""
    conds = {c.get("type"): c.get("status") for c in ((crd or {}).get("status") or {}).get("conditions") or []}
    return conds.get("Established") == "True" and "KubernetesAPIApprovalPolicyConformant" in conds


def install(kube: Kube, crd: dict) -> None:
    """Replace the v1 InferencePool CRD with `crd` and wait until its API is served.

    Deleting first gives the new CRD a new UID, for which the API server builds
    its handler from scratch: no request can meet the previous revision's schema.
    """
    try:
        kube.request("DELETE", CRD_PATH)
    except ApiError as e:
        if e.status != 404:
            raise
    _poll(f"CRD {CRD_NAME} to be deleted", lambda: _get_crd(kube) is None)
    _poll(f"{GROUP_VERSION_PATH} to stop serving inferencepools", lambda: not _served(kube))
    kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                 body={k: v for k, v in crd.items() if k != "status"})
    _poll(f"CRD {CRD_NAME} to be Established and its API approval judged", lambda: _settled(_get_crd(kube)))
    _poll(f"{GROUP_VERSION_PATH} to serve inferencepools", lambda: _served(kube))


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def v1_kube():
    """One embedded cluster for the module, without an InferencePool CRD of its own."""
    with EmbeddedCluster() as c:
        kube = Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))
        kube.request("POST", "/api/v1/namespaces",
                     body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield kube


@pytest.fixture(scope="module", params=V1_REVISIONS, ids=lambda r: r.name)
def revision(request, v1_kube) -> V1Revision:
    """The revision whose CRD is installed on v1_kube (pytest groups the tests by it)."""
    rev: V1Revision = request.param
    install(v1_kube, yaml.safe_load(rev.crd_file.read_text()))
    return rev


@pytest.fixture(scope="module")
def status_pool(revision, v1_kube) -> str:
    """A pool of the installed revision whose status the status cases write (by dry run)."""
    name = f"status-{revision.name.replace('.', '-')}"
    v1_kube.request("POST", POOLS, body=base_pool(name))
    return name


# -- judging ----------------------------------------------------------------------------


def judge(expect: Accepted | Rejected, write: Callable[[], dict], what: str) -> None:
    try:
        answer = write()
    except ApiError as e:
        if isinstance(expect, Accepted):
            pytest.fail(f"{what}: refused with HTTP {e.status} {e.causes or e.body.get('message')}; "
                        "the revision accepts it")
        seen = {(c.get("field"), c.get("reason")) for c in e.causes}
        assert e.status == 422 and (expect.field, expect.reason) in seen, (
            f"{what}: HTTP {e.status} with causes {sorted(seen, key=str)}; "
            f"want 422 with {expect.reason} at {expect.field}")
        return
    assert isinstance(expect, Accepted), (
        f"{what}: accepted, read back as {answer}; want {expect.reason} at {expect.field}")
    if expect.path:
        found, value = _walk(answer, expect.path)
        if expect.absent:
            assert not found, f"{what}: {expect.path} reads back as {value!r}; want it absent"
        else:
            assert found and value == expect.value, (
                f"{what}: {expect.path} reads back as {value!r}; want {expect.value!r}")


# -- tests ------------------------------------------------------------------------------


def test_crd_is_installed_as_generated(revision, v1_kube):
    """The API server accepts the CRD (CEL rules compile within the cost budget) and serves it."""
    crd = _get_crd(v1_kube)
    assert crd["metadata"]["annotations"][BUNDLE_ANNOTATION] == revision.bundle_version
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    # A *.k8s.io group needs the approval annotation; the CRD carries a valid one.
    assert conds.get("KubernetesAPIApprovalPolicyConformant") == "True", conds
    assert conds.get("NamesAccepted") == "True" and conds.get("Established") == "True", conds
    [resource] = [r for r in v1_kube.request("GET", GROUP_VERSION_PATH)["resources"] if r["name"] == "inferencepools"]
    assert resource["kind"] == "InferencePool" and resource["namespaced"] is True
    assert resource["shortNames"] == ["infpool"] and resource["singularName"] == "inferencepool"
    subresources = {r["name"] for r in v1_kube.request("GET", GROUP_VERSION_PATH)["resources"]}
    assert "inferencepools/status" in subresources and "inferencepools/scale" not in subresources


@pytest.mark.parametrize("case", SPEC_CASES, ids=lambda c: c.name)
def test_spec(case: Case, revision, v1_kube):
    """Create (dry run) a pool changed by the case; accepted or refused as the revision says."""
    pool = base_pool(fresh_name())
    case.mutate(pool)
    expect = case.expect(revision)
    judge(expect, lambda: v1_kube.request("POST", POOLS, body=pool, query=[("dryRun", "All")]),
          f"[{case.rule}] {revision.name}: {case.name}")


@pytest.mark.parametrize("case", STATUS_CASES, ids=lambda c: c.name)
def test_status(case: Case, revision, v1_kube, status_pool):
    """Write (dry run) the status of a pool as the case says; accepted or refused as the revision says."""
    obj: dict = {}
    case.mutate(obj)
    expect = case.expect(revision)
    judge(expect, lambda: v1_kube.request("PATCH", f"{POOLS}/{status_pool}/status", body=obj,
                                          query=[("dryRun", "All")], content_type="application/merge-patch+json"),
          f"[{case.rule}] {revision.name}: {case.name}")


def test_defaults_are_stored_and_read_back(revision, v1_kube):
    """D1-D3, D7, D8 on a real create (not a dry run), read back with a GET."""
    name = fresh_name()
    v1_kube.request("POST", POOLS, body=base_pool(name))
    got = v1_kube.request("GET", f"{POOLS}/{name}")
    assert got["spec"]["endpointPickerRef"] == {"group": "", "kind": "Service", "name": "epp",
                                                "port": {"number": 9002}, "failureMode": "FailClose"}
    assert got["spec"].get("appProtocol") == ("http" if revision.app_protocol else None)
    assert not (got.get("status") or {}).get("parents"), got.get("status")


def test_unknown_spec_field_is_refused_under_strict_validation(revision, v1_kube):
    """S11: an unknown field is pruned, and refused with fieldValidation=Strict."""
    pool = base_pool(fresh_name())
    pool["spec"]["endpointPickerRef"]["timeout"] = "1s"
    answer = v1_kube.request("POST", POOLS, body=pool, query=[("dryRun", "All")])
    assert "timeout" not in answer["spec"]["endpointPickerRef"]
    with pytest.raises(ApiError) as e:
        v1_kube.request("POST", POOLS, body=pool, query=[("dryRun", "All"), ("fieldValidation", "Strict")])
    assert e.value.status == 400, e.value


def _apply(kube: Kube, path: str, obj: dict, manager: str) -> dict:
    return kube.request("PATCH", path, body=obj, content_type="application/apply-patch+yaml",
                        query=[("fieldManager", manager), ("force", "true")])


def test_target_ports_are_an_atomic_list(revision, v1_kube):
    """S13: server-side apply replaces targetPorts as a whole; two managers' ports do not merge."""
    name = fresh_name()
    path = f"{POOLS}/{name}"
    first = base_pool(name)
    _apply(v1_kube, path, first, "manager-a")
    second = base_pool(name)
    second["spec"]["targetPorts"] = ports(8001)
    got = _apply(v1_kube, path, second, "manager-b")
    assert got["spec"]["targetPorts"] == ports(8001)


def test_status_parents_are_an_atomic_list(revision, v1_kube):
    """S17: server-side apply replaces status.parents as a whole; two controllers' entries do not merge."""
    name = fresh_name()
    v1_kube.request("POST", POOLS, body=base_pool(name))
    path = f"{POOLS}/{name}/status"
    head = {"apiVersion": API_VERSION, "kind": "InferencePool", "metadata": {"name": name, "namespace": NAMESPACE}}
    _apply(v1_kube, path, {**head, "status": {"parents": [parent("gw-a")]}}, "controller-a")
    got = _apply(v1_kube, path, {**head, "status": {"parents": [parent("gw-b")]}}, "controller-b")
    assert [p["parentRef"]["name"] for p in got["status"]["parents"]] == ["gw-b"]


def test_revisions_are_told_apart_by_the_cases():
    """Every pair of revisions differs in the expectations of some case, so none is redundant."""
    def outcomes(rev: V1Revision) -> list:
        return [c.expect(rev) for c in SPEC_CASES + STATUS_CASES]

    for a, b in itertools.combinations(V1_REVISIONS, 2):
        assert outcomes(a) != outcomes(b), f"no case tells {a.name} from {b.name}"
