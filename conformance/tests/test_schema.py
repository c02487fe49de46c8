"""Schema validation and defaulting (rules S1-S9, S11, S12, D1-D7), from manifests/schema/.

These judge only the API server and its installed CRD, never the implementation,
so nothing an implementation does may change their verdict: a controller may
write any pool's status the moment it appears. Dry-run cases persist nothing;
the others create real objects in the test's own namespace (deleted afterwards),
read them back as stored by the create, and update them without a
resourceVersion precondition (see conformance/schema_cases.py).
"""

import pytest

from conformance import schema_cases
from conformance.revisions import NOT_APPLICABLE_PREFIX

BASES, CASES = schema_cases.load()


@pytest.fixture(scope="module")
def status_pool(kube, base_namespace):
    """One real pool that status cases write to with dry-run, so it never changes."""
    pool = schema_cases.merge_patch(BASES["pool"], {"metadata": {"name": "status-cases", "namespace": base_namespace}})
    return kube.create(pool)  # deleted with the base namespace


def _skip_unless_applies(case, revision):
    if case.expectation(revision) is None:
        pytest.skip(f"{NOT_APPLICABLE_PREFIX} case {case.name} does not apply to API revision {revision.name}")


@pytest.mark.parametrize(("case", "via"), schema_cases.params(CASES, "spec"))
def test_schema_spec(case, via, kube, api_revision, request):
    _skip_unless_applies(case, api_revision)
    namespace = request.getfixturevalue("base_namespace" if via == "dry-run" else "namespace")
    schema_cases.run_spec_case(kube, BASES, case, via, api_revision, namespace)


@pytest.mark.parametrize(("case", "via"), schema_cases.params(CASES, "status"))
def test_schema_status(case, via, kube, api_revision, status_pool):
    _skip_unless_applies(case, api_revision)
    schema_cases.run_status_case(kube, case, api_revision, status_pool)
