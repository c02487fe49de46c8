"""A routed pool gets an entry for its Gateway, Accepted and ResolvedRefs (C1, C2, C3)."""

import pytest

pytestmark = [pytest.mark.rule("C1", "C2", "C3"), pytest.mark.features("SupportInferencePool")]


def test_pool_accepted(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool_condition("Accepted", "True", "Accepted")
    topology.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs")
