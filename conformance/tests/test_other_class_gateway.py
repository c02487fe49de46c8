"""A Gateway of another class routing to the pool gets no entry from this implementation (C11)."""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C11"), pytest.mark.features("SupportInferencePool")]


@pytest.fixture
def other_class(kube, namespace):
    name = f"{namespace}-other"  # cluster-scoped: named after the test's namespace, deleted afterwards
    kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                 "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "inferencepool-conformance"}},
                 "spec": {"controllerName": "example.com/no-such-controller"}})
    yield name
    kube.delete("gateway.networking.k8s.io/v1", "GatewayClass", name)


def test_other_class_gateway(topology, other_class):
    topology.apply_file("pool-with-route.yaml", skip=("HTTPRoute/route",))
    topology.create(topology.gateway("other-gateway", gateway_class=other_class))
    topology.create(topology.route("other-route", "other-gateway", "pool"))
    # Then a route from a Gateway of the class under test: once its entry is
    # there, the implementation has seen the pool after the other route.
    topology.create(topology.route("route", "gateway", "pool"))
    pool = topology.wait_pool_condition("Accepted", "True", "Accepted")
    entry = conditions.pool_parent(pool, topology.revision, "other-gateway", topology.namespace)
    assert entry is None, f"an entry was written for a Gateway of another class: {entry}"
