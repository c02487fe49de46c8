"""Status is a subresource (rule S10).

Status sent with the main resource is ignored, spec sent to /status is
ignored, and metadata.generation moves on spec changes only.
"""

import pytest

from conformance.conditions import pool_parents as _parents

# One entry, spelled so that every API's parentRef shape takes it (kind and name).
ENTRY = {"parentRef": {"kind": "Gateway", "name": "gw"},
         "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                         "lastTransitionTime": "2025-01-01T00:00:00Z"}]}

pytestmark = pytest.mark.rule("S10")


@pytest.fixture
def api(api_revision):
    return api_revision.api


def _pool(api, namespace: str) -> dict:
    return api.spell_pool({"kind": "InferencePool", "metadata": {"name": "pool", "namespace": namespace},
                           "spec": {"selector": {"matchLabels": {"app": "model-server"}},
                                    "targetPorts": [{"number": 8000}],
                                    "endpointPickerRef": {"name": "picker", "port": {"number": 9002}}}})


def _status(api) -> dict:
    return {api.status_key: [ENTRY]}


def test_status_on_create_is_ignored(kube, namespace, api_revision, api):
    # `fresh`: what a pool nobody wrote status for reads back with (no parent, or
    # the placeholder parent of a revision with a status default).
    fresh, key = api_revision.fresh_parents, api.status_key
    created = kube.create({**_pool(api, namespace), "status": _status(api)})
    assert _parents(created) == fresh, (
        f"create did not ignore the status it was sent: status.{key} is {_parents(created)}, expected {fresh}")
    # As stored by the create: a controller's later status write is no part of it.
    read = kube.get_as_of(api.api_version, "InferencePool", "pool", namespace, created["metadata"]["resourceVersion"])
    assert _parents(read) == fresh, f"the stored pool has status.{key} {_parents(read)}, expected {fresh}"


def test_status_on_update_is_ignored(kube, namespace, api):
    created = kube.create(_pool(api, namespace))
    key = api.status_key
    # Against the version last seen, so the status before the write is exactly `before`.
    before, updated = kube.write_latest(api.api_version, "InferencePool", "pool", namespace,
                                        lambda pool: kube.replace({**pool, "status": _status(api)}), current=created)
    assert _parents(updated) == _parents(before), (
        f"an update of the main resource changed status.{key} from {_parents(before)} to {_parents(updated)}")
    before, patched = kube.write_latest(api.api_version, "InferencePool", "pool", namespace, lambda pool: kube.patch(
        api.api_version, "InferencePool", "pool",
        {"metadata": {"resourceVersion": pool["metadata"]["resourceVersion"]}, "status": _status(api)},
        namespace=namespace), current=updated)
    assert _parents(patched) == _parents(before), (
        f"a patch of the main resource changed status.{key} from {_parents(before)} to {_parents(patched)}")


def test_spec_on_status_is_ignored(kube, namespace, api):
    created = kube.create(_pool(api, namespace))
    after = kube.patch(api.api_version, "InferencePool", "pool",
                       {**api.target_port_patch(9999), "status": _status(api)},
                       namespace=namespace, subresource="status")
    assert after["spec"] == created["spec"], (
        f"a write to /status changed spec from {created['spec']} to {after['spec']}")
    assert _parents(after)[0]["parentRef"]["name"] == "gw", "a write to /status did not change status"
    read = kube.get(api.api_version, "InferencePool", "pool", namespace)
    assert read["spec"] == created["spec"], f"the stored spec changed through /status to {read['spec']}"


def test_generation_moves_on_spec_changes_only(kube, namespace, api):
    g0 = kube.create(_pool(api, namespace))["metadata"]["generation"]
    pools = api.api_version
    after_status = kube.patch(pools, "InferencePool", "pool", {"status": _status(api)}, namespace=namespace,
                              subresource="status")
    assert after_status["metadata"]["generation"] == g0, "a status write moved metadata.generation"
    after_label = kube.patch(pools, "InferencePool", "pool", {"metadata": {"labels": {"tier": "gpu"}}},
                             namespace=namespace)
    assert after_label["metadata"]["generation"] == g0, "a metadata-only change moved metadata.generation"
    after_spec = kube.patch(pools, "InferencePool", "pool", api.target_port_patch(8001), namespace=namespace)
    assert after_spec["metadata"]["generation"] == g0 + 1, (
        f"a spec change moved metadata.generation from {g0} to {after_spec['metadata']['generation']}, "
        f"expected {g0 + 1}")
