"""Status is a subresource (rule S10).

Status sent with the main resource is ignored, spec sent to /status is
ignored, and metadata.generation moves on spec changes only.
"""

import pytest

from conformance import schema_cases
from conformance.kube import ApiError

POOL = "inference.networking.x-k8s.io/v1alpha2"
STATUS = {"parent": [{"parentRef": {"kind": "Gateway", "name": "gw"},
                      "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                                      "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]}

pytestmark = pytest.mark.rule("S10")


def _pool(namespace: str, name: str = "pool") -> dict:
    return schema_cases.merge_patch(schema_cases.base_pool(), {"metadata": {"name": name, "namespace": namespace}})


def _parents(obj: dict) -> list:
    return (obj.get("status") or {}).get("parent") or []


def _write_against_latest(kube, namespace: str, write) -> tuple[dict, dict]:
    """(the pool as read, the server's answer to `write(pool)`), against the version just read.

    A controller may write the pool's status at any moment; a write that loses
    that race (409) reads again and is retried, so the pool's status at the
    moment of the write is exactly the one read.
    """
    for _ in range(10):
        before = kube.get(POOL, "InferencePool", "pool", namespace)
        try:
            return before, write(before)
        except ApiError as e:
            if e.status != 409:
                raise
    pytest.fail("every write conflicted with another writer of the pool 10 times in a row", pytrace=False)


def test_status_on_create_is_ignored(kube, namespace, api_revision):
    # `fresh`: what a pool nobody wrote status for reads back with (no parent, or
    # the placeholder parent of a revision with a status default).
    fresh = api_revision.fresh_parents
    created = kube.create({**_pool(namespace), "status": STATUS})
    assert _parents(created) == fresh, (
        f"create did not ignore the status it was sent: status.parent is {_parents(created)}, expected {fresh}")
    # As stored by the create: a controller's later status write is no part of it.
    read = kube.get_as_of(POOL, "InferencePool", "pool", namespace, created["metadata"]["resourceVersion"])
    assert _parents(read) == fresh, f"the stored pool has status.parent {_parents(read)}, expected {fresh}"


def test_status_on_update_is_ignored(kube, namespace):
    kube.create(_pool(namespace))
    before, updated = _write_against_latest(kube, namespace, lambda pool: kube.replace({**pool, "status": STATUS}))
    assert _parents(updated) == _parents(before), (
        f"an update of the main resource changed status.parent from {_parents(before)} to {_parents(updated)}")
    before, patched = _write_against_latest(kube, namespace, lambda pool: kube.patch(
        POOL, "InferencePool", "pool",
        {"metadata": {"resourceVersion": pool["metadata"]["resourceVersion"]}, "status": STATUS},
        namespace=namespace))
    assert _parents(patched) == _parents(before), (
        f"a patch of the main resource changed status.parent from {_parents(before)} to {_parents(patched)}")


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
    after_status = kube.patch(POOL, "InferencePool", "pool", {"status": STATUS}, namespace=namespace,
                              subresource="status")
    assert after_status["metadata"]["generation"] == g0, "a status write moved metadata.generation"
    after_label = kube.patch(POOL, "InferencePool", "pool", {"metadata": {"labels": {"tier": "gpu"}}},
                             namespace=namespace)
    assert after_label["metadata"]["generation"] == g0, "a metadata-only change moved metadata.generation"
    after_spec = kube.patch(POOL, "InferencePool", "pool", {"spec": {"targetPortNumber": 8001}}, namespace=namespace)
    assert after_spec["metadata"]["generation"] == g0 + 1, (
        f"a spec change moved metadata.generation from {g0} to {after_spec['metadata']['generation']}, "
        f"expected {g0 + 1}")
