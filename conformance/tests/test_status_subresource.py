"""Status is a subresource (rule S10).

Status sent with the main resource is ignored, spec sent to /status is
ignored, and metadata.generation moves on spec changes only.
"""

import pytest

from conformance import schema_cases

POOL = "inference.networking.x-k8s.io/v1alpha2"
STATUS = {"parent": [{"parentRef": {"kind": "Gateway", "name": "gw"},
                      "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                                      "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]}

pytestmark = pytest.mark.rule("S10")


def _pool(namespace: str, name: str = "pool") -> dict:
    return schema_cases.merge_patch(schema_cases.base_pool(), {"metadata": {"name": name, "namespace": namespace}})


def _parents(obj: dict) -> list:
    return (obj.get("status") or {}).get("parent") or []


# `fresh`: what a pool nobody wrote status for reads back with (no parent, or
# the placeholder parent of a revision with a status default).


def test_status_on_create_is_ignored(kube, namespace, api_revision):
    fresh = api_revision.fresh_parents
    created = kube.create({**_pool(namespace), "status": STATUS})
    assert _parents(created) == fresh, (
        f"create did not ignore the status it was sent: status.parent is {_parents(created)}, expected {fresh}")
    read = kube.get(POOL, "InferencePool", "pool", namespace)
    assert _parents(read) == fresh, f"the stored pool has status.parent {_parents(read)}, expected {fresh}"


def test_status_on_update_is_ignored(kube, namespace, api_revision):
    fresh = api_revision.fresh_parents
    created = kube.create(_pool(namespace))
    updated = kube.replace({**created, "status": STATUS})
    assert _parents(updated) == fresh, (
        f"an update of the main resource changed status.parent to {_parents(updated)}, expected {fresh}")
    patched = kube.patch(POOL, "InferencePool", "pool", {"status": STATUS}, namespace=namespace)
    assert _parents(patched) == fresh, (
        f"a patch of the main resource changed status.parent to {_parents(patched)}, expected {fresh}")


def test_spec_on_status_is_ignored(kube, namespace):
    kube.create(_pool(namespace))
    after = kube.patch(POOL, "InferencePool", "pool", {"spec": {"targetPortNumber": 9999}, "status": STATUS},
                       namespace=namespace, subresource="status")
    assert after["spec"]["targetPortNumber"] == 8000, "a write to /status changed spec.targetPortNumber"
    assert after["status"]["parent"][0]["parentRef"]["name"] == "gw", "a write to /status did not change status"
    read = kube.get(POOL, "InferencePool", "pool", namespace)
    assert read["spec"]["targetPortNumber"] == 8000, "the stored spec changed through /status"


def test_generation_moves_on_spec_changes_only(kube, namespace):
    g0 = kube.create(_pool(namespace))["metadata"]["generation"]
    after_status = kube.patch(POOL, "InferencePool", "pool", {"status": STATUS}, namespace=namespace, subresource="status")
    assert after_status["metadata"]["generation"] == g0, "a status write moved metadata.generation"
    after_label = kube.patch(POOL, "InferencePool", "pool", {"metadata": {"labels": {"tier": "gpu"}}}, namespace=namespace)
    assert after_label["metadata"]["generation"] == g0, "a metadata-only change moved metadata.generation"
    after_spec = kube.patch(POOL, "InferencePool", "pool", {"spec": {"targetPortNumber": 8001}}, namespace=namespace)
    assert after_spec["metadata"]["generation"] == g0 + 1, (
        f"a spec change moved metadata.generation from {g0} to {after_spec['metadata']['generation']}, expected {g0 + 1}")
