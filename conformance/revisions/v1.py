"""`inference.networking.k8s.io/v1`: the GA API, GIE v1.0 - v1.6 (SPEC section 8).

Five schema revisions: v1.0.2 bounds `selector.matchLabels` (1 to 64 entries);
v1.1 allows up to 8 unique `targetPorts` and adds `status.parents[].controllerName`;
v1.4 adds `appProtocol`; v1.6 makes `endpointPickerRef` optional (a pool
without it: Accepted True, or False with `EndpointPickerRefMissing`). No v1
revision defaults a placeholder parent or any condition.
"""

from __future__ import annotations

from ..data import MANIFESTS
from . import Api, Revision

API = Api(name="v1", group="inference.networking.k8s.io", version="v1", status_key="parents",
          picker_field="endpointPickerRef", title="InferencePool inference.networking.k8s.io/v1 (GA)")


def _revision(name: str, title: str, release: str, **facts) -> Revision:
    return Revision(name=name, title=title, api=API, parent_ref_shape="ParentGatewayReference",
                    crd=MANIFESTS / "crd" / "revisions" / name / API.crd_file, extension_version=release, **facts)


REVISIONS = (
    _revision("v1.0", "GIE v1.0.0 - v1.0.1", "v1.0.0"),
    _revision("v1.0.2", "GIE v1.0.2", "v1.0.2", bounded_match_labels=True),
    _revision("v1.1", "GIE v1.1.0 - v1.3.x", "v1.1.0", bounded_match_labels=True, controller_name=True,
              multiple_target_ports=True),
    _revision("v1.4", "GIE v1.4.0 - v1.5.x", "v1.4.0", bounded_match_labels=True, controller_name=True,
              multiple_target_ports=True, app_protocol=True),
    _revision("v1.6", "GIE v1.6.x", "v1.6.0", bounded_match_labels=True, controller_name=True,
              multiple_target_ports=True, app_protocol=True, picker_ref_optional=True),
)


def fingerprint(schema: dict) -> dict:
    """The schema facts that tell the v1 revisions apart."""
    spec = schema.get("properties", {}).get("spec", {})
    props = spec.get("properties", {})
    parents = schema.get("properties", {}).get("status", {}).get("properties", {}).get("parents", {})
    return {
        "target_ports_max": props.get("targetPorts", {}).get("maxItems"),
        "match_labels_bounded": "minProperties" in props.get("selector", {}).get("properties", {}).get(
            "matchLabels", {}),
        "app_protocol": "appProtocol" in props,
        "picker_ref_required": "endpointPickerRef" in (spec.get("required") or []),
        "controller_name": "controllerName" in parents.get("items", {}).get("properties", {}),
    }


# What each revision's schema shows, from its entry above.
FINGERPRINTS = {r.name: {"target_ports_max": 8 if r.multiple_target_ports else 1,
                         "match_labels_bounded": r.bounded_match_labels, "app_protocol": r.app_protocol,
                         "picker_ref_required": not r.picker_ref_optional, "controller_name": r.controller_name}
                for r in REVISIONS}
