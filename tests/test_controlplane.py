"""The embedded control plane: a real kube-apiserver, etcd and controller-manager."""

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster import binary, embedded
from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import ApiError, Kube
from conformance.wait import wait_for

REPO = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes once reaped.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _port_open(server: str) -> bool:
    host, port = server.removeprefix("https://").split(":")
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, int(port))) == 0


def test_version_is_the_real_kubernetes(kube):
    assert kube.server_version()["gitVersion"] == binary.kubernetes_version()


def test_serves_only_tls_on_loopback_without_anonymous_access(cluster):
    assert cluster.server.startswith("https://127.0.0.1:")
    import ssl
    import urllib.request
    ctx = ssl.create_default_context(cafile=str(cluster.dir / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as e:  # no client certificate: anonymous
        urllib.request.urlopen(cluster.server + "/api", context=ctx, timeout=5)
    assert e.value.code == 401


def test_credentials_are_private(cluster):
    assert cluster.dir.stat().st_mode & 0o077 == 0
    for f in cluster.dir.glob("*.key"):
        assert f.stat().st_mode & 0o777 == 0o600, f
    assert cluster.kubeconfig.stat().st_mode & 0o777 == 0o600


def test_both_crd_groups_are_served(kube):
    pools = kube.request("GET", "/apis/inference.networking.x-k8s.io/v1alpha2")
    assert "inferencepools" in {r["name"] for r in pools["resources"]}
    gw = kube.request("GET", "/apis/gateway.networking.k8s.io/v1")
    assert {"gatewayclasses", "gateways", "httproutes"} <= {r["name"] for r in gw["resources"]}


def test_namespace_is_deleted_completely(kube):
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "goes-away"}})
    kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "goes-away"},
                 "spec": {"ports": [{"port": 80}]}})
    kube.delete("v1", "Namespace", "goes-away")
    # Upstream's namespace controller holds every deletion for 5 s before it starts.
    wait_for(kube, "v1", "Namespace", "goes-away", None, lambda o: o is None, timeout=30,
             what="namespace goes-away to be deleted", expected="gone")


def test_inferencepool_round_trip_with_defaults(kube):
    kube.create({"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool",
                 "metadata": {"name": "pool", "namespace": "default"},
                 "spec": {"selector": {"app": "m"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}}})
    read = kube.get("inference.networking.x-k8s.io/v1alpha2", "InferencePool", "pool", "default")
    assert read["spec"]["extensionRef"] == {"name": "epp", "group": "", "kind": "Service", "failureMode": "FailClose"}
    kube.delete("inference.networking.x-k8s.io/v1alpha2", "InferencePool", "pool", "default")


def test_externalname_service_can_be_created(kube):
    svc = kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "default"},
                       "spec": {"type": "ExternalName", "externalName": "picker.example.com"}})
    assert svc["spec"]["type"] == "ExternalName"
    kube.delete("v1", "Service", "ext", "default")


def test_default_service_account_exists(kube):
    assert kube.get("v1", "ServiceAccount", "default", "default") is not None


def test_start_stop_leaves_nothing_behind():
    c = EmbeddedCluster().start()
    pids, directory, server = c.pids, c.dir, c.server
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    c.stop()
    assert not any(_alive(p) for p in pids)
    assert not directory.exists()
    assert not _port_open(server)  # (other tests' clusters may come and go meanwhile: only ours is checked)


def test_two_clusters_at_once():
    clusters = [EmbeddedCluster(), EmbeddedCluster()]
    errors = []

    def start(c):
        try:
            c.start()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=start, args=(c,)) for c in clusters]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert clusters[0].server != clusters[1].server
        kubes = [Kube(config.new_client_from_config(config_file=str(c.kubeconfig))) for c in clusters]
        kubes[0].create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "only-in-first"}})
        assert kubes[1].get("v1", "Namespace", "only-in-first") is None
    finally:
        for c in clusters:
            c.stop()


def test_a_port_taken_before_its_component_binds_it_is_replaced(monkeypatch):
    """A port found free can be taken before the component binds it (a cluster starting beside this one,
    an outgoing connection's local port): the start goes on, on new ports, and says nothing of it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: as an outgoing connection's local port is
        port = taken.getsockname()[1]
        first, free = [port], embedded._free_port
        monkeypatch.setattr(embedded, "_free_port", lambda: first.pop() if first else free())  # etcd's, first
        c = EmbeddedCluster().start()
        try:
            assert "address already in use" in (c.dir / "etcd.log").read_text()  # the first boot met the port
            assert len(c.pids) == 3 and all(_alive(p) for p in c.pids)
            kube = Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))
            assert kube.server_version()["gitVersion"].startswith("v1.")
        finally:
            c.stop()


def test_second_start_reuses_the_binary():
    path = binary.ensure()
    mtime = path.stat().st_mtime_ns
    messages = []
    c = EmbeddedCluster().start(progress=messages.append)
    c.stop()
    assert messages == [], "the binary was built again"
    assert binary.ensure() == path and path.stat().st_mtime_ns == mtime


def test_cluster_up_command_serves_until_interrupted():
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "cluster", "up"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.endswith("kubeconfig"), proc.stderr.read() if proc.poll() is not None else line
        kubeconfig = Path(line)
        doc = yaml.safe_load(kubeconfig.read_text())
        assert doc["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        kube = Kube(config.new_client_from_config(config_file=str(kubeconfig)))
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                       "inferencepools.inference.networking.x-k8s.io")
        assert crd is not None
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    assert not kubeconfig.parent.exists()


def test_cluster_up_without_crds():
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "cluster", "up", "--no-crds"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        kube = Kube(config.new_client_from_config(config_file=proc.stdout.readline().strip()))
        with pytest.raises(ApiError) as e:
            kube.request("GET", "/apis/inference.networking.x-k8s.io/v1alpha2")
        assert e.value.status == 404
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_the_api_server_collects_garbage_near_its_memory_limit(monkeypatch):
    """kube-apiserver runs with GOGC=off and GOMEMLIMIT=384MiB unless the environment sets them."""
    monkeypatch.delenv("GOGC", raising=False)
    monkeypatch.setenv("GOMEMLIMIT", "1GiB")
    c = EmbeddedCluster().start()
    try:
        environments = {p.name: dict(v.split("=", 1) for v in
                                     Path(f"/proc/{p.popen.pid}/environ").read_text().split("\0") if "=" in v)
                        for p in c._procs}
    finally:
        c.stop()
    assert (environments["kube-apiserver"].get("GOGC"), environments["kube-apiserver"]["GOMEMLIMIT"]) == (
        "off", "1GiB")
    assert "GOGC" not in environments["etcd"] and "GOGC" not in environments["kube-controller-manager"]
