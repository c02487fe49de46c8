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
