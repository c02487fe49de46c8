"""Schema validation and defaulting (rules S1-S9, S11-S17, D1-D9), from manifests/schema/<api>/.

These judge only the API server and its installed CRD, never the implementation,
so nothing an implementation does may change their verdict: a controller may
write any pool's status the moment it appears. Dry-run cases persist nothing;
the others create real objects, each named for its case and way of sending
(`schema_cases.object_name`), in a namespace the session's schema cases share
(each test's object is deleted at its end), read them back as stored by the
create, and update them without a resourceVersion precondition (see
conformance/schema_cases.py).

The tests are parametrized over the cases of every API (`v1alpha2`, `v1`);
each case carries its API (`Case.api`), and a case runs only with the
`api_revision` of its own API (the plugin deselects the other pairs). Where
the API's revision has no such case, the test is skipped as not-applicable.
"""

import pytest

from conformance import schema_cases
from conformance.kube import ApiError
from conformance.revisions import NOT_APPLICABLE_PREFIX

BASES, CASES = schema_cases.load_all()


@pytest.fixture(scope="module")
def status_pool(kube, base_namespace, api_revision):
    """One real pool of the judged API that status cases write to with dry-run, so it never changes."""
    api = api_revision.api
    name = f"status-cases-{api.name}"
    pool = schema_cases.merge_patch(BASES[api.name]["pool"], {"metadata": {"name": name, "namespace": base_namespace}})
    try:
        return schema_cases.StatusPool(kube.create(pool))  # deleted with the base namespace
    except ApiError as e:
        if e.status != 409:  # created by an earlier module instance of this session: the same pool
            raise
        return schema_cases.StatusPool(kube.get(api.api_version, "InferencePool", name, base_namespace))


def _skip_unless_applies(case, revision):
    if case.expectation(revision) is None:
        pytest.skip(f"{NOT_APPLICABLE_PREFIX} case {case.name} does not apply to API revision {revision.name}")


@pytest.mark.parametrize("sending", schema_cases.params(CASES, "spec"))
def test_schema_spec(sending, kube, api_revision, request):
    case, via = sending.case, sending.via
    _skip_unless_applies(case, api_revision)
    namespace = request.getfixturevalue("base_namespace" if via == "dry-run" else "shared_namespace")
    schema_cases.run_spec_case(kube, BASES[case.api], case, via, api_revision, namespace)


@pytest.mark.parametrize("sending", schema_cases.params(CASES, "status"))
def test_schema_status(sending, kube, api_revision, status_pool):
    _skip_unless_applies(sending.case, api_revision)
    schema_cases.run_status_case(kube, sending.case, api_revision, status_pool)
