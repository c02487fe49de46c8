"""Upstream's endpoint picker is built from the named version and runs for a pool inside the sandbox.

The traffic tier judges gateways against upstream's own EPP (conformance.traffic.epp). These tests
check that the binary is built from the version the repository names, is run the way upstream's
conformance deployment runs it, and really works here: started inside a network sandbox against the
embedded cluster (reached through an ApiBridge), it waits for its InferencePool (health NOT_SERVING),
reads it (SERVING), discovers a Pod whose status the test writes itself (there is no kubelet), and
polls the pod's /metrics on its pod address, which exists only inside the sandbox.
"""

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster import pki
from conformance.cluster.binary import BuildError
from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import ApiError, Kube
from conformance.revisions import REVISIONS
from conformance.traffic import epp, netns, probe
from conformance.traffic.bridge import ApiBridge, Bridge
from conformance.traffic.embedded import epp_program
from conformance.traffic.kubelet import Container
from conformance.traffic.netns import Sandbox, start_process

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

# The InferencePool CRD of GIE v1.4.0 - v1.5.x: the GA API as the EPP's own release ships it.
REVISION = REVISIONS["v1.4"]
NAMESPACE, POOL, NODE, POD, POD_IP = "epp-test", "pool", "node-a", "model-0", "10.244.0.7"
PY = [sys.executable, "-I", "-S", "-c"]

# Inside the sandbox: a model server's /metrics on IP:PORT with vLLM's metric names. Prints
# "listening", then the path of its first requests (later ones are not printed: nobody reads them).
MODEL_SERVER = """
import http.server, sys
BODY = b'''# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting 7
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc 0.25
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1.7e+09
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="1024"} 1
'''
seen = 0
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global seen
        seen += 1
        if seen <= 3:
            print("GET", self.path, flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
print("listening", flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="module")
def binary() -> Path:
    return epp.ensure()


@pytest.mark.slow  # the first run builds the EPP: minutes
def test_the_binary_is_upstreams_named_version(binary):
    assert epp.version() == "v1.4.0"
    assert os.access(binary, os.X_OK)
    assert binary.name.startswith("epp-v1.4.0-") and binary == epp.cached_path()
    assert epp.ensure() == binary  # cached: no second build
    with Sandbox(stop_timeout=1) as sb:
        out = sb.run([str(binary), "--help"], check=False)
    usage = out.stdout + out.stderr
    for flag in ("--pool-name", "--pool-namespace", "--pool-group", "--grpc-port", "--grpc-health-port",
                 "--config-file", "--secure-serving", "--tracing", "--metrics-port", "--metrics-endpoint-auth"):
        assert flag in usage, f"{flag} not in the EPP's --help"


def test_launch_runs_it_as_upstreams_conformance_deployment(tmp_path):
    run = epp.launch("primary-inference-pool", "inference-conformance-app-backend", tmp_path / "kubeconfig",
                     tmp_path, binary="/bin/epp")
    argv = run.argv
    assert argv[0] == "/bin/epp"

    def value(flag):
        return argv[argv.index(flag) + 1]

    assert value("--pool-name") == "primary-inference-pool"
    assert value("--pool-namespace") == "inference-conformance-app-backend"
    assert value("--pool-group") == "inference.networking.k8s.io"
    assert (value("--grpc-port"), value("--grpc-health-port"), value("--metrics-port")) == ("9002", "9003", "9090")
    assert value("--v") == "4" and value("--zap-encoder") == "json"
    assert {"--secure-serving=false", "--tracing=false", "--metrics-endpoint-auth=false"} <= set(argv)
    assert run.env["KUBECONFIG"] == str(tmp_path / "kubeconfig")
    plugins = yaml.safe_load(Path(value("--config-file")).read_text())
    assert plugins["kind"] == "EndpointPickerConfig"
    assert [p["type"] for p in plugins["plugins"]] == ["header-based-testing-filter",
                                                       "destination-endpoint-served-verifier"]
    assert plugins["schedulingProfiles"] == [{"name": "conformance-profile",
                                              "plugins": [{"pluginRef": "header-based-testing-filter"}]}]
    # Nothing it is handed is an address: the sandbox, not the command line, keeps it off the network.
    assert netns.not_loopback(argv, env=run.env, files=[run.config_file]) == []
    other = epp.launch("secondary-inference-pool", "ns", "kc", tmp_path, group="inference.networking.x-k8s.io",
                       binary="/bin/epp", grpc_port=9012, health_port=9013, metrics_port=9091)
    assert other.config_file != run.config_file and "9012" in other.argv and "9013" in other.argv
    assert other.argv[other.argv.index("--pool-group") + 1] == "inference.networking.x-k8s.io"


@pytest.mark.parametrize(("args", "cert_path"), [
    ([], "CERTS"),  # serves TLS, names no certificate: it gets the one made for the data plane
    (["--secure-serving=false"], None),  # plain h2c: no certificate at all
    (["--cert-path=/certs"], "MOUNTED"),  # its own certificate, from its own volume, is kept
])
def test_the_kubelet_gives_a_tls_epp_a_ready_certificate(tmp_path, args, cert_path):
    mounted = tmp_path / "volume"
    pod = {"metadata": {"name": "endpoint-picker", "namespace": "ns"}}
    spec = {"name": "epp", "image": "epp", "args": ["--pool-name=pool", "--config-file=/config/plugins.yaml", *args]}
    container = Container(pod, spec, "10.244.0.9", "10.245.255.1", {},
                          {"/config": tmp_path / "config", "/certs": mounted})
    run = epp_program("/bin/epp", "kubeconfig", str(tmp_path / "certs"))(container)
    given = [a.partition("=")[2] for a in run.argv if a.startswith("--cert-path")]
    wanted = {"CERTS": [str(tmp_path / "certs")], "MOUNTED": ["/certs"], None: []}[cert_path]
    assert given == wanted, run.argv
    assert f"--config-file={tmp_path / 'config' / 'plugins.yaml'}" in run.argv


def test_the_data_planes_certificate_is_one_the_epp_loads(tmp_path):
    pair = pki.self_signed_server(tmp_path, "endpoint-picker")
    assert (pair.cert.name, pair.key.name) == ("tls.crt", "tls.key")  # the names --cert-path reads
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(pair.cert, pair.key)  # a matching pair


def test_a_missing_go_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    monkeypatch.delenv(epp.BINARY_ENV, raising=False)
    with pytest.raises(BuildError, match=r"^Go is not installed \(no `go` on PATH\)") as caught:
        epp.ensure(progress=lambda _: None)
    assert "\n" not in str(caught.value)
    assert not list(tmp_path.glob("inferencepool-conformance/epp-*"))
    monkeypatch.setenv(epp.BINARY_ENV, str(tmp_path / "no-such-epp"))
    with pytest.raises(BuildError, match="is not an executable file"):
        epp.ensure()


def test_the_cache_key_follows_the_module_and_the_recipe(monkeypatch):
    key = epp.cached_path()
    assert key.parent == epp.cache_dir() and re.fullmatch(r"epp-v1\.4\.0-[0-9a-f]{16}", key.name)
    monkeypatch.setattr(epp, "_BUILD_FLAGS", (*epp._BUILD_FLAGS, "-race"))
    assert epp.cached_path() != key


# -- the EPP at work ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def v1_cluster():
    with EmbeddedCluster(crd_paths=REVISION.embedded_crds) as c:
        yield c


def create_pod_without_kubelet(kube: Kube) -> None:
    """A Node, a Pod bound to it, and the Pod's status as a kubelet would write it: Running, Ready, podIP."""
    kube.request("POST", "/api/v1/nodes", body={"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": POD, "namespace": NAMESPACE, "labels": {"app": "model"}},
           "spec": {"nodeName": NODE, "automountServiceAccountToken": False,
                    "containers": [{"name": "model", "image": "model-server", "ports": [{"containerPort": 3000}]}]}}
    try:  # the ServiceAccount admission wants the namespace's default one, which a controller makes a bit later
        kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "default", "namespace": NAMESPACE}})
    except ApiError as e:
        if e.status != 409:
            raise
    kube.create(pod)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.patch("v1", "Pod", POD, {"status": {
        "phase": "Running", "podIP": POD_IP, "podIPs": [{"ip": POD_IP}], "hostIP": "192.0.2.1", "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
    }}, namespace=NAMESPACE, subresource="status")


def wait_for(what: str, check, timeout: float = 60.0, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{detail()}")


def collecting(log: Path) -> bool:
    """Whether the EPP's log says it took the pod: it starts polling the pod's address (v1.4.0 logs
    "Starting refresher" with the address in its metadata)."""
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return any(e.get("msg") == "Starting refresher" and f"Address:{POD_IP} " in str(e.get("metadata"))
               for e in entries)


@pytest.mark.slow  # the build (first run), a cluster of its own, the EPP
def test_the_epp_serves_a_pool_inside_the_sandbox(binary, v1_cluster, tmp_path):
    kube = Kube(config.new_client_from_config(config_file=str(v1_cluster.kubeconfig)))
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    with Sandbox(stop_timeout=2) as sb, ApiBridge(sb, v1_cluster.server):
        sb.add_address(POD_IP)
        model = start_process([*PY, MODEL_SERVER, POD_IP, "3000"], sandbox=sb, stdout=subprocess.PIPE, text=True)
        assert model.stdout.readline().strip() == "listening"
        picker = epp.EndpointPicker(sb, POOL, NAMESPACE, v1_cluster.kubeconfig, tmp_path, binary=binary)
        with picker, Bridge.out_of(sb, picker.launch.health_port) as health, \
                Bridge.out_of(sb, picker.launch.metrics_port) as metrics:
            epp_pid = picker.process.pid
            assert sb.contains(epp_pid)

            def answer():
                try:
                    return probe.grpc_health("127.0.0.1", health.outside[1], epp.HEALTH_SERVICE)
                except OSError:
                    return None

            # Up, talking to the API server through the bridge, but no pool yet: not serving.
            assert wait_for("the EPP's health service", answer, detail=picker.tail) == "NOT_SERVING"
            kube.create(REVISION.api.spell_pool({
                "apiVersion": REVISION.api.api_version, "kind": "InferencePool",
                "metadata": {"name": POOL, "namespace": NAMESPACE},
                "spec": {"selector": {"matchLabels": {"app": "model"}}, "targetPorts": [{"number": 3000}],
                         "endpointPickerRef": {"name": "pool-epp", "port": {"number": 9002}}},
            }))
            picker.wait_serving(60)
            assert answer() == "SERVING"

            create_pod_without_kubelet(kube)
            wait_for("the EPP to take the pod", lambda: collecting(picker.log), detail=picker.tail)
            # It polls the pod's /metrics on the pod address, inside the sandbox.
            assert model.stdout.readline().split() == ["GET", "/metrics"]

            def scraped():
                with urllib.request.urlopen(metrics.outside_url + "/metrics", timeout=5) as r:
                    text = r.read().decode()
                return re.search(rf'inference_pool_per_pod_queue_size{{model_server_pod="{POD}-rank-0",'
                                 rf'name="{POOL}"}} 7\b', text) and re.search(
                                     rf'inference_pool_ready_pods{{name="{POOL}"}} 1\b', text)

            wait_for("the EPP's metrics to show the pod's queue (7) and one ready pod", scraped, detail=picker.tail)
    assert picker.process is None and not Path(f"/proc/{epp_pid}").exists()  # stopped by its PID, and reaped
