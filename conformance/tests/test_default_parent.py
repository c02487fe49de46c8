"""The status default of revisions that have one (GIE v0.5.x): the placeholder parent
(kind Status, name default) goes once an implementation accepts the pool (C1), and
when the last route goes no entry of the implementation is left: either no parent at
all (what GIE v0.5.x's own conformance suite demands) or the lone placeholder put
back (what the CRD's status default would show) (C9).

How the API text is read here, and the upstream test that settles it, is written
down in docs/revisions.md.
"""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C1", "C9"), pytest.mark.features("SupportInferencePool"),
              pytest.mark.api_revision_has("status_default_parent")]


def test_default_parent(topology):
    revision = topology.revision
    accepted = conditions.judge_pool_condition(revision, "gateway", topology.namespace, "Accepted", "True", "Accepted")

    def accepted_without_placeholder(pool):
        verdict = accepted(pool)
        if verdict.ok and any(revision.is_default_parent(p) for p in conditions.pool_parents(pool)):
            return conditions.Judgement(("the placeholder parent (kind Status, name default) is still there next "
                                         "to the implementation's entry",), verdict.answered)
        return verdict

    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool(accepted_without_placeholder,
                       conditions.describe("Accepted", "True", "Accepted", "gateway", topology.namespace)
                       + ", and no placeholder parent (kind Status, name default) next to it")
    # The only route goes: the implementation no longer manages the pool.
    topology.delete("HTTPRoute", "route")
    topology.wait_no_implementation_entry()
