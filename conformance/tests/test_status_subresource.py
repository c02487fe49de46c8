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
    base, _ = schema_cases.load()
    return schema_cases.merge_patch(base["pool"], {"metadata": {"name": name, "namespace": namespace}})


def test_status_on_create_is_ignored(kube, namespace):
    created = kube.create({**_pool(namespace), "status": STATUS})
    assert not (created.get("status") or {}).get("parent"), f"create kept the status it was sent: {created['status']}"
    read = kube.get(POOL, "InferencePool", "pool", namespace)
    assert not (read.get("status") or {}).get("parent"), f"the stored pool has the status sent on create: {read['status']}"


def test_status_on_update_is_ignored(kube, namespace):
    created = kube.create(_pool(namespace))
    updated = kube.replace({**created, "status": STATUS})
    assert not (updated.get("status") or {}).get("parent"), f"an update of the main resource changed status: {updated['status']}"
    patched = kube.patch(POOL, "InferencePool", "pool", {"status": STATUS}, namespace=namespace)
    assert not (patched.get("status") or {}).get("parent"), f"a patch of the main resource changed status: {patched['status']}"


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
