"""The status default of revisions that have one (GIE v0.5.x): the placeholder parent
(kind Status, name default) goes once an implementation accepts the pool, and comes
back when no implementation manages the pool any more (C1, C9).

How the API text is read here is written down in docs/revisions.md.
"""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C1", "C9"), pytest.mark.features("SupportInferencePool"),
              pytest.mark.api_revision_has("status_default_parent")]


def test_default_parent_removed_and_restored(topology):
    revision = topology.revision
    accepted = conditions.pool_condition(revision, "gateway", topology.namespace, "Accepted", "True", "Accepted")

    def accepted_without_placeholder(pool):
        return accepted(pool) and not any(revision.is_default_parent(p) for p in conditions.pool_parents(pool))

    def only_placeholder(pool):
        parents = conditions.pool_parents(pool)
        return pool is not None and len(parents) == 1 and revision.is_default_parent(parents[0])

    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool(accepted_without_placeholder,
                       conditions.describe("Accepted", "True", "Accepted", "gateway", topology.namespace)
                       + ", and no placeholder parent (kind Status, name default) next to it")
    # The only route goes: the implementation no longer manages the pool and
    # no other parent is left, so the placeholder is back.
    topology.delete("HTTPRoute", "route")
    topology.wait_pool(only_placeholder,
                       "status.parent holds only the placeholder parent (kind Status, name default) again",
                       timeout=topology.timeouts.InferencePoolMustNotHaveParent)
