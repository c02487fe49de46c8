"""Conditions that carry observedGeneration follow metadata.generation (C4)."""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C4"), pytest.mark.features("SupportInferencePool")]


def _all_latest(revision, namespace):
    def check(pool):
        entry = conditions.pool_parent(pool, revision, "gateway", namespace)
        gen = (pool or {}).get("metadata", {}).get("generation")
        conds = (entry or {}).get("conditions") or []
        return bool(conds) and all(conditions.is_latest(c, gen) for c in conds) and conditions.matches(
            conditions.find(conds, "Accepted"), "True", "Accepted", gen)
    return check


def test_pool_observed_generation(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool_condition("Accepted", "True", "Accepted")
    for port in (8001, 8002):
        changed = topology.kube.patch("inference.networking.x-k8s.io/v1alpha2", "InferencePool", "pool",
                                      {"spec": {"targetPortNumber": port}}, namespace=topology.namespace)
        generation = changed["metadata"]["generation"]
        topology.wait_pool(_all_latest(topology.revision, topology.namespace),
                           f"every condition of the Gateway's entry at observedGeneration {generation} "
                           "(or without one), Accepted True")
