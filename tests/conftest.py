"""Fixtures for the project's own tests (not the conformance suite)."""

import pytest
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube
from conformance.revisions import REVISIONS


@pytest.fixture(scope="module")
def cluster():
    """A real embedded cluster with the seed CRDs, shared by one test module."""
    with EmbeddedCluster(crd_paths=REVISIONS["seed"].embedded_crds) as c:
        yield c


@pytest.fixture(scope="module")
def kube(cluster):
    return Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


@pytest.fixture
def live_cluster(tmp_path):
    """(cluster, kube): an embedded cluster of the test's own, with the reference GatewayClass and
    the reference implementation running against it the way its user runs it."""
    from conformance.revisions import DEFAULT

    from .suite_run import reference_gateway_class, start_reference, stop

    with EmbeddedCluster(crd_paths=REVISIONS[DEFAULT].embedded_crds) as c:
        admin = Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))
        reference_gateway_class(admin)
        implementation = start_reference(c.kubeconfig, tmp_path / "implementation.log", DEFAULT)
        try:
            yield c, admin
        finally:
            stop(implementation)
