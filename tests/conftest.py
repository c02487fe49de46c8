"""Fixtures for the project's own tests (not the conformance suite), and the order they run in.

Order. A few meta-tests take minutes each (FIRST, longest first) and the rest seconds or less.
Under pytest-xdist (CI runs `pytest -n 2 tests`) the run ends when its last worker does, so the
long tests start at once and the other tests are handed out one at a time (--maxschedchunk=1
unless given) to whichever worker is free: tests queued in a chunk behind a long test wait for it
while the other worker runs dry. A worker holds the next test while it runs one, so the longest
test is followed by a short one, and the other long ones (the two mutant runs, which share their
module's clusters) go to the other worker one after the other. Then come the other tests marked
`slow`, then the rest, as collected. These hooks run around the suite plugin's own (which also
puts `slow` tests first, and hands out a few tests at a time): first for the option, and for the
order after every other hook, so that for this directory's tests the order above is the one that
holds.
"""

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


# The meta-tests that take minutes, longest first (each several minutes on a busy two-core machine).
# (Node ids are relative to this directory, the rootdir of tests/pytest.ini.)
FIRST = (
    "test_fault_catching.py::test_every_fault_is_caught_by_its_tests_alone",
    "test_crd_mutants.py::test_every_loosened_crd_fails_the_schema_tier[v1.6]",
    "test_crd_mutants.py::test_every_loosened_crd_fails_the_schema_tier[seed]",
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if getattr(config.option, "maxschedchunk", "absent") is None:  # pytest-xdist's option, not given
        config.option.maxschedchunk = 1


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    yield
    rank = {nodeid: n for n, nodeid in enumerate(FIRST)}
    first = sorted((i for i in items if i.nodeid in rank), key=lambda i: rank[i.nodeid])
    slow = [i for i in items if i.nodeid not in rank and i.get_closest_marker("slow")]
    rest = [i for i in items if i.nodeid not in rank and not i.get_closest_marker("slow")]
    items[:] = first[:1] + rest[:1] + first[1:] + slow + rest[1:]
