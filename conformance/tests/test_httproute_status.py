"""The HTTPRoute to a pool: Accepted True reason Accepted; ResolvedRefs True, or False/BackendNotFound
without the pool (C13), each at the route's generation."""

import pytest

pytestmark = [pytest.mark.rule("C13"), pytest.mark.features("SupportInferencePool")]


def test_httproute_status(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.wait_route_condition("Accepted", "True", "Accepted")
    topology.wait_route_condition("ResolvedRefs", "True", "ResolvedRefs")


def test_httproute_status_missing_pool(topology):
    topology.apply_file("pool-with-route.yaml", skip=("InferencePool/pool",))
    topology.wait_route_condition("Accepted", "True", "Accepted")
    topology.wait_route_condition("ResolvedRefs", "False", "BackendNotFound")
