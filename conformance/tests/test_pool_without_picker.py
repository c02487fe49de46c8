"""A pool without an endpoint picker reference (v1.6+): Accepted True, or False EndpointPickerRefMissing (C15).

From GIE v1.6 `endpointPickerRef` is optional. Upstream's InferencePoolMissingEPPRef
takes either answer, and so does this test; anything else (no entry, another
reason) fails. Like upstream's, it first wants the route to such a pool Accepted.
"""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C15", "C1"), pytest.mark.features("SupportInferencePool"),
              pytest.mark.api_revision_has("picker_ref_optional")]


def test_pool_without_picker(topology):
    topology.apply_file("pool-with-route.yaml", skip=("InferencePool/pool",))
    topology.create(topology.pool(picker=False))
    topology.wait_route_condition("Accepted", "True", "Accepted")
    ns, revision = topology.namespace, topology.revision
    accepted = conditions.judge_pool_condition(revision, "gateway", ns, "Accepted", "True", "Accepted")
    missing = conditions.judge_pool_condition(revision, "gateway", ns, "Accepted", "False", "EndpointPickerRefMissing")
    topology.wait_pool(conditions.judge_any(accepted, missing),
                       f"status.{topology.status_key} entry for Gateway {ns}/gateway with Accepted True reason "
                       "Accepted, or Accepted False reason EndpointPickerRefMissing, at the current generation")
