"""The state the pytest-xdist controller publishes for its workers comes in two stages: the cluster
(a worker's tests of the API server alone need nothing more) and then the implementation. A reader of
a stage blocks until the controller has published that stage, and no longer."""

import os
import threading
import time

from conformance.session import ClusterHost


def read_in_thread(read) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(read()), daemon=True)
    thread.start()
    return thread, got


def test_the_cluster_stage_is_read_before_the_implementation_is_up(tmp_path):
    controller = ClusterHost(tmp_path)
    fds = controller.hold()
    worker = ClusterHost(tmp_path)
    cluster, got_cluster = read_in_thread(worker.cluster_state)
    whole, got_whole = read_in_thread(worker.state)
    time.sleep(0.2)
    assert not got_cluster and not got_whole, "a stage was read before it was published"

    controller.publish(fds.pop(ClusterHost.CLUSTER), ClusterHost.CLUSTER, {"kubeconfig": "k"})
    cluster.join(5)
    assert got_cluster == [{"kubeconfig": "k"}]
    time.sleep(0.2)
    assert not got_whole, "the implementation's stage was read before it was published"

    controller.publish(fds.pop(ClusterHost.STATE), ClusterHost.STATE, {"kubeconfig": "k", "implementation": True})
    whole.join(5)
    assert got_whole == [{"kubeconfig": "k", "implementation": True}]


def test_a_controller_gone_before_publishing_ends_the_run_with_a_reason(tmp_path):
    controller = ClusterHost(tmp_path)
    fds = controller.hold()
    for fd in fds.values():  # the locks go with the process, no state written
        os.close(fd)
    state = ClusterHost(tmp_path).cluster_state()
    assert "exit" in state and "ended before the embedded cluster was up" in state["exit"], state
