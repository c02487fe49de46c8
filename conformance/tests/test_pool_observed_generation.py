"""Conditions that carry observedGeneration follow metadata.generation (C4)."""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C4"), pytest.mark.features("SupportInferencePool")]


def _all_latest(topology):
    """The Gateway's entry is Accepted True, and every condition in it is at the current generation."""
    accepted = conditions.judge_pool_condition(topology.revision, "gateway", topology.namespace,
                                               "Accepted", "True", "Accepted")

    def judge(pool):
        verdict = accepted(pool)
        if not verdict.ok:
            return verdict
        entry = conditions.pool_parent(pool, topology.revision, "gateway", topology.namespace)
        generation = pool["metadata"]["generation"]
        # A stale condition is no answer to the change yet: never an early end.
        return conditions.Judgement(tuple(
            f"the entry for Gateway {topology.namespace}/gateway has condition {c.get('type')} at "
            f"observedGeneration {c.get('observedGeneration')} where the pool is at generation {generation}"
            for c in entry.get("conditions") or [] if not conditions.is_latest(c, generation)))
    return judge


def test_pool_observed_generation(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool_condition("Accepted", "True", "Accepted")
    for port in (8001, 8002):
        patched = topology.patch_pool_port(port)
        generation = patched["metadata"]["generation"]
        topology.wait_pool(_all_latest(topology),
                           f"every condition of the Gateway's entry at observedGeneration {generation} "
                           "(or without one), Accepted True")
