"""The kubelet stand-in makes the embedded cluster's Pods real: Running, Ready, served inside the sandbox.

The traffic tier needs model-server Pods that a real control plane publishes (EndpointSlices) and
that answer at their pod address, which must exist only inside the suite's network sandbox (SPEC
section 10). These tests run the kubelet against a real embedded control plane (its EndpointSlice
controller included) and check: a Pod becomes Running and Ready with a 10.244.x address, answers
there from inside the sandbox and nowhere else, and is published in a Service's EndpointSlice;
readiness follows `set_ready`, a crash and readiness gates (whose conditions, written by others, its
own status writes keep); deletion stops the process and removes the object; an
image without a program stays Pending and says why, until one is registered; and closing leaves no
process, address or Node.
"""

import errno
import ipaddress
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from conformance.cluster.embedded import EmbeddedCluster
from conformance.options import DEFAULT_EPP_IMAGE, DEFAULT_MODEL_SERVER_IMAGE, DEFAULT_SENTINEL_IMAGE
from conformance.revisions import REVISIONS
from conformance.traffic import manifests, netns
from conformance.traffic.kubelet import NO_PROGRAM, Kubelet, Launch, model_server
from conformance.traffic.netns import Sandbox

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

NS = "traffic"
PROBE = [sys.executable, "-I", "-S", str(Path(__file__).with_name("probe.py"))]
HEALTH_SERVER = [sys.executable, "-I", "-S", str(Path(__file__).with_name("grpc_health_server.py"))]
BODY = json.dumps({"model": "conformance-fake-model", "prompt": "Write as if you were a critic: San Francisco"})
CLIENT = """
import http.client, json, sys
host, port, body = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection(host, port, timeout=5)
conn.request("POST", "/", body=body, headers={"Content-Type": "application/json"})
resp = conn.getresponse()
print(json.dumps({"status": resp.status, "body": json.loads(resp.read())}))
"""


@pytest.fixture(scope="module")
def cluster():
    """A real embedded control plane without CRDs (this module needs Pods, Services and EndpointSlices)."""
    with EmbeddedCluster() as c:
        yield c


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(stop_timeout=1) as sb:
        yield sb


def namespace(kube, name: str) -> None:
    """Create a namespace and wait for its default ServiceAccount (Pods are refused until it exists)."""
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(f"the default ServiceAccount of {name}", lambda: kube.get("v1", "ServiceAccount", "default", name))


@pytest.fixture(scope="module")
def kubelet(cluster, kube, sandbox):
    namespace(kube, NS)
    with Kubelet(kube, sandbox, namespaces=[NS]) as k:
        yield k
    assert k.errors == []


def model_server_pod(name: str, port: int = 8000, **spec) -> dict:
    """A Pod like the status topology's model servers (manifests/status/pool-with-route.yaml)."""
    container = {"name": "model-server", "image": DEFAULT_MODEL_SERVER_IMAGE,
                 "env": [{"name": "HTTP_PORT", "value": str(port)}],
                 "ports": [{"name": "http", "containerPort": port}],
                 "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 2}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **spec}}


def wait_for(what: str, check, timeout: float = 15.0):
    """Poll `check` until it returns something true; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        if value := check():
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.02)


def condition(pod: dict | None, kind: str) -> str | None:
    return next((c["status"] for c in ((pod or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == kind), None)


def ready_pod(kube, name: str) -> dict:
    return wait_for(f"pod {name} Ready", lambda: (p := kube.get("v1", "Pod", name, NS))
                    and condition(p, "Ready") == "True" and p)


def endpoints(kube, service: str) -> list[dict]:
    slices = kube.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
                          query=[("labelSelector", f"kubernetes.io/service-name={service}")])
    return [e for s in slices["items"] for e in s.get("endpoints") or []]


def post(sandbox: Sandbox, ip: str, port: int) -> dict:
    """POST a completion request to ip:port from inside the sandbox."""
    return json.loads(sandbox.run([sys.executable, "-S", "-c", CLIENT, ip, str(port), BODY]).stdout)


def test_a_model_server_pod_runs_ready_and_answers_inside_the_sandbox(kubelet, kube, sandbox):
    began = time.monotonic()
    kube.create(model_server_pod("model-server-0"))  # unbound: the kubelet binds it to its Node
    pod = ready_pod(kube, "model-server-0")
    took = time.monotonic() - began
    status, ip = pod["status"], pod["status"]["podIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.244.0.0/16") and ip != kubelet.node_ip
    assert not ipaddress.ip_address(ip).is_loopback and status["podIPs"] == [{"ip": ip}]
    assert pod["spec"]["nodeName"] == kubelet.node_name and status["hostIP"] == kubelet.node_ip
    assert status["phase"] == "Running" and status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}
    [container] = status["containerStatuses"]
    assert container["ready"] and container["started"] and "running" in container["state"]
    # The process runs inside the sandbox, and answers there at podIP:port ...
    [pid] = kubelet.pids(NS, "model-server-0")
    assert sandbox.contains(pid) and kubelet.pod_ip(NS, "model-server-0") == ip
    parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert parent == kubelet._forks.process.pid  # forked from the warm interpreter, no interpreter start of its own
    answer = post(sandbox, ip, 8000)
    assert answer["status"] == 200
    assert {k: answer["body"][k] for k in ("pod", "namespace", "httpPort", "endpoint")} == {
        "pod": "model-server-0", "namespace": NS, "httpPort": "8000", "endpoint": f"{ip}:8000"}
    # ... and the machine itself has no such address.
    with socket.socket() as s, pytest.raises(OSError) as bound:
        s.bind((ip, 0))
    assert bound.value.errno == errno.EADDRNOTAVAIL
    print(f"pod Ready {took * 1000:.0f} ms after its creation")


def test_the_endpointslice_follows_readiness(kubelet, kube):
    kube.create(model_server_pod("model-server-1"))
    kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "model-server-1", "namespace": NS},
                 "spec": {"selector": {"app": "model-server-1"}, "ports": [{"port": 8000, "targetPort": 8000}]}})
    ip = ready_pod(kube, "model-server-1")["status"]["podIP"]
    [endpoint] = wait_for("the endpoint", lambda: endpoints(kube, "model-server-1"))
    assert endpoint["addresses"] == [ip] and endpoint["nodeName"] == kubelet.node_name
    assert endpoint["conditions"]["ready"] is True and endpoint["targetRef"]["name"] == "model-server-1"

    kubelet.set_ready(NS, "model-server-1", False)
    pod = kube.get("v1", "Pod", "model-server-1", NS)  # written before set_ready returns
    assert condition(pod, "Ready") == "False" and condition(pod, "ContainersReady") == "False"
    assert pod["status"]["containerStatuses"][0]["ready"] is False
    wait_for("the endpoint NotReady", lambda: [e for e in endpoints(kube, "model-server-1")
                                               if e["addresses"] == [ip] and e["conditions"]["ready"] is False])
    kubelet.set_ready(NS, "model-server-1", True)
    wait_for("the endpoint Ready again", lambda: [e for e in endpoints(kube, "model-server-1")
                                                  if e["addresses"] == [ip] and e["conditions"]["ready"] is True])


GATE = "example.com/serving"


def set_gate(kube, name: str, status: str) -> None:
    """Write the readiness gate's condition as its owner would: a strategic merge patch of pods/status."""
    kube.request("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", body={"status": {"conditions": [
        {"type": GATE, "status": status, "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
        content_type="application/strategic-merge-patch+json")


def test_readiness_gates_decide_ready_and_their_conditions_are_kept(kubelet, kube):
    kube.create(model_server_pod("gated-0", readinessGates=[{"conditionType": GATE}]))
    kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gated-0", "namespace": NS},
                 "spec": {"selector": {"app": "gated-0"}, "ports": [{"port": 8000, "targetPort": 8000}]}})
    # The containers are ready, the gate's condition is not there: ContainersReady, but not Ready.
    pod = wait_for("ContainersReady", lambda: (p := kube.get("v1", "Pod", "gated-0", NS))
                   and condition(p, "ContainersReady") == "True" and p)
    [ready] = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert ready["message"] == f'corresponding condition of pod readiness gate "{GATE}" does not exist.'

    set_gate(kube, "gated-0", "True")
    pod = ready_pod(kube, "gated-0")
    assert not {"reason", "message"} & set(next(c for c in pod["status"]["conditions"] if c["type"] == "Ready"))
    ip = pod["status"]["podIP"]
    wait_for("the endpoint Ready", lambda: [e for e in endpoints(kube, "gated-0")
                                            if e["addresses"] == [ip] and e["conditions"]["ready"] is True])
    # The kubelet's own status writes (NotReady and back) keep the condition it does not own.
    kubelet.set_ready(NS, "gated-0", False)
    pod = kube.get("v1", "Pod", "gated-0", NS)
    assert condition(pod, "Ready") == "False" and condition(pod, GATE) == "True"
    kubelet.set_ready(NS, "gated-0", True)
    assert condition(ready_pod(kube, "gated-0"), GATE) == "True"

    # The gate's condition turns False: Ready follows, the containers stay ready, the endpoint is not ready.
    set_gate(kube, "gated-0", "False")
    pod = wait_for("Ready False", lambda: (p := kube.get("v1", "Pod", "gated-0", NS))
                   and condition(p, "Ready") == "False" and p)
    [ready] = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["reason"], condition(pod, "ContainersReady"), condition(pod, GATE)) == (
        "ReadinessGatesNotReady", "True", "False")
    assert ready["message"] == f'the status of pod readiness gate "{GATE}" is not "True", but False'
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    wait_for("the endpoint NotReady", lambda: [e for e in endpoints(kube, "gated-0")
                                               if e["addresses"] == [ip] and e["conditions"]["ready"] is False])
    set_gate(kube, "gated-0", "True")
    ready_pod(kube, "gated-0")


def test_a_gate_condition_written_before_the_first_status_is_kept(kubelet, kube):
    """What the suite does on any cluster: create the Pod, set its gate's condition at once."""
    kube.create(model_server_pod("gated-1", readinessGates=[{"conditionType": GATE}]))
    set_gate(kube, "gated-1", "True")
    pod = ready_pod(kube, "gated-1")
    assert condition(pod, GATE) == "True" and condition(pod, "ContainersReady") == "True"


def test_deleting_a_pod_stops_its_process_and_the_object_goes(kubelet, kube, sandbox):
    kube.create(model_server_pod("model-server-2", terminationGracePeriodSeconds=30))
    ip = ready_pod(kube, "model-server-2")["status"]["podIP"]
    [pid] = kubelet.pids(NS, "model-server-2")
    kube.delete("v1", "Pod", "model-server-2", NS)  # graceful: 30 s, unless a kubelet says it is done
    began = time.monotonic()
    wait_for("the pod object to go", lambda: kube.get("v1", "Pod", "model-server-2", NS) is None, timeout=10)
    assert time.monotonic() - began < 10
    assert not os.path.exists(f"/proc/{pid}") or pid not in sandbox.pids()
    wait_for("its address to leave the sandbox", lambda: ip not in sandbox.addresses)
    with pytest.raises(KeyError):
        kubelet.pids(NS, "model-server-2")


def test_two_containers_two_ports_and_a_pod_already_bound(kubelet, kube, sandbox):
    pod = model_server_pod("dp-0", port=3000, nodeName=kubelet.node_name)
    # Each container its own HTTP_PORT and H2C_PORT, as upstream's data-parallel Pods (echo-basic serves both).
    second = {**pod["spec"]["containers"][0], "name": "rank-1",
              "env": [{"name": "HTTP_PORT", "value": "3002"}, {"name": "H2C_PORT", "value": "3003"}],
              "ports": [{"containerPort": 3002}], "readinessProbe": {"httpGet": {"path": "/", "port": 3002}}}
    pod["spec"]["containers"].append(second)
    kube.create(pod)
    ip = ready_pod(kube, "dp-0")["status"]["podIP"]
    served = [post(sandbox, ip, port)["body"] for port in (3000, 3002)]
    assert [(s["pod"], s["httpPort"]) for s in served] == [("dp-0", "3000"), ("dp-0", "3002")]
    assert len(kubelet.pids(NS, "dp-0")) == 2


def test_a_crashed_container_is_notready_then_restarted(kubelet, kube):
    kube.create(model_server_pod("model-server-3"))
    ready_pod(kube, "model-server-3")
    [pid] = kubelet.pids(NS, "model-server-3")
    os.kill(pid, signal.SIGKILL)
    wait_for("the pod NotReady", lambda: condition(kube.get("v1", "Pod", "model-server-3", NS), "Ready") == "False")
    pod = ready_pod(kube, "model-server-3")
    [container] = pod["status"]["containerStatuses"]
    assert container["restartCount"] == 1 and container["lastState"]["terminated"]["exitCode"] == 137
    assert kubelet.pids(NS, "model-server-3") != [pid]


def test_an_image_without_a_program_stays_pending_until_one_is_registered(kubelet, kube):
    pod = model_server_pod("unknown")
    pod["spec"]["containers"][0]["image"] = "registry.example.com/some/model-server:v1"
    kube.create(pod)
    waiting = wait_for("the container to wait", lambda: [
        s["state"]["waiting"] for s in (kube.get("v1", "Pod", "unknown", NS)["status"].get("containerStatuses") or [])
        if "waiting" in s["state"]])
    assert waiting[0]["reason"] == NO_PROGRAM
    assert "registry.example.com/some/model-server:v1" in waiting[0]["message"]
    pod = kube.get("v1", "Pod", "unknown", NS)
    assert pod["status"]["phase"] == "Pending" and "podIP" not in pod["status"]
    [ready] = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "False" and "registry.example.com/some/model-server:v1" in ready["message"]
    # Once a program is registered for the image, the Pod runs (the kubelet tries again every second).
    kubelet.register("registry.example.com/some/model-server:v1", model_server)
    ready_pod(kube, "unknown")


def test_a_registered_program_runs_its_image(kubelet, kube, sandbox):
    seen = []

    def program(c):
        config = open(c.local_path("/config/plugins.yaml")).read()
        seen.append((c.pod_name, c.ip, c.env["GREETING"], c.env["MY_IP"], c.env["FROM_CONFIG"], config))
        return model_server(c)

    kubelet.register("registry.example.com/registered", program)  # any tag of that repository
    pod = model_server_pod("registered")
    container = pod["spec"]["containers"][0]
    container["image"] = "registry.example.com/registered:v2"
    container["env"] += [
        {"name": "GREETING", "value": "hi $(HTTP_PORT)"},
        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "FROM_CONFIG", "valueFrom": {"configMapKeyRef": {"name": "plugins", "key": "plugins.yaml"}}}]
    # A config file from a ConfigMap volume, as upstream's EPP Deployment mounts its plugins config.
    container["volumeMounts"] = [{"name": "config", "mountPath": "/config"}]
    pod["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "plugins"}}]
    kube.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugins"},
        "data": {"plugins.yaml": "kind: EndpointPickerConfig\n"}})
    kube.create(pod)
    ip = ready_pod(kube, "registered")["status"]["podIP"]
    config = "kind: EndpointPickerConfig\n"
    assert seen == [("registered", ip, "hi 8000", ip, config, config)]
    assert post(sandbox, ip, 8000)["body"]["pod"] == "registered"


def test_a_grpc_readiness_probe_wants_serving_not_a_listening_port(kubelet, kube, tmp_path):
    """As on a real node, a container whose readiness probe is `grpc` is Ready only while its health
    service answers SERVING for the probe's service: upstream's EPP listens there from its start and
    answers SERVING only once it has read its pool."""
    serving = tmp_path / "serving"
    kubelet.register("registry.example.com/health", lambda c: Launch(
        [*HEALTH_SERVER, c.ip, "9003", "inference-extension", str(serving)], ports=[9003]))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "picker", "namespace": NS},
           "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
               "name": "epp", "image": "registry.example.com/health:v1",
               "ports": [{"name": "grpc-health", "containerPort": 9003}],
               "readinessProbe": {"grpc": {"port": 9003, "service": "inference-extension"}, "periodSeconds": 1}}]}}
    kube.create(pod)

    def says(answer: str):
        found = kube.get("v1", "Pod", "picker", NS)
        message = next((c.get("message", "") for c in (found or {}).get("status", {}).get("conditions", [])
                        if c["type"] == "ContainersReady"), "")
        return answer in message and found

    listening = wait_for("the probe's NOT_SERVING in the Pod's status", lambda: says("answered NOT_SERVING"))
    assert condition(listening, "Ready") == "False" and listening["status"]["phase"] == "Running"
    serving.touch()
    ready_pod(kube, "picker")
    serving.unlink()
    wait_for("the Pod NotReady again", lambda: condition(kube.get("v1", "Pod", "picker", NS), "Ready") == "False")
    # The probe asks for its own service: another one is SERVICE_UNKNOWN, never Ready.
    pod["metadata"]["name"] = "other-service"
    pod["spec"]["containers"][0]["readinessProbe"]["grpc"]["service"] = "readiness"
    serving.touch()
    kube.create(pod)
    wait_for("the probe's SERVICE_UNKNOWN", lambda: (p := kube.get("v1", "Pod", "other-service", NS)) and any(
        "answered SERVICE_UNKNOWN" in c.get("message", "") for c in p.get("status", {}).get("conditions", [])))


def test_the_sentinel_pod_shows_its_first_connection_as_an_exited_container(kubelet, kube, sandbox):
    """Rule T5's sentinel (manifests/traffic/externalname-picker.yaml), busybox's `nc -l -p PORT -e false`:
    Ready once both containers listen; a connection to one ends that container (exit code 1), which
    restartPolicy Never leaves terminated, while the other runs on."""
    docs = manifests.load("externalname-picker.yaml", namespace=NS, gateway_class="unused", api=REVISIONS["v1.6"].api,
                          model_server_image=DEFAULT_MODEL_SERVER_IMAGE, epp_image=DEFAULT_EPP_IMAGE)
    [pod] = [d for d in docs if (d["kind"], d["metadata"]["name"]) == ("Pod", "sentinel")]
    assert pod["spec"]["containers"][0]["image"] == DEFAULT_SENTINEL_IMAGE
    kube.create(pod)
    ip = ready_pod(kube, "sentinel")["status"]["podIP"]
    assert len(kubelet.pids(NS, "sentinel")) == 2
    assert sandbox.run([*PROBE, "connect", ip, "9002"]).stdout.strip() == ""  # connected, closed, nothing sent
    pod = wait_for("the picker container to exit", lambda: (p := kube.get("v1", "Pod", "sentinel", NS)) and any(
        "terminated" in c["state"] for c in p["status"]["containerStatuses"]) and p)
    states = {c["name"]: c for c in pod["status"]["containerStatuses"]}
    assert states["picker"]["state"]["terminated"]["exitCode"] == 1 and states["picker"]["restartCount"] == 0
    assert "running" in states["witness"]["state"] and states["witness"]["ready"] is True
    assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "False"
    assert "connection from" in kubelet.logs(NS, "sentinel", "picker")
    assert "ECONNREFUSED" in sandbox.run([*PROBE, "connect", ip, "9002"]).stdout  # not restarted: nothing listens


def test_close_leaves_no_process_no_address_no_node(cluster, kube, sandbox):
    namespace(kube, "closing")
    pod = model_server_pod("closing-0")
    pod["metadata"]["namespace"] = "closing"
    other = Kubelet(kube, sandbox, namespaces=["closing"], node_name="closing-node", pod_cidr="10.244.200.0/24")
    with other:
        assert kube.request("GET", "/api/v1/nodes/closing-node")["status"]["conditions"][0]["status"] == "True"
        kube.create(pod)
        wait_for("closing-0 Ready", lambda: condition(kube.get("v1", "Pod", "closing-0", "closing"), "Ready") == "True")
        pids = other.pids("closing", "closing-0")
        ip = other.pod_ip("closing", "closing-0")
        assert pids and ip.startswith("10.244.200.") and ip in sandbox.addresses
    assert other.errors == []
    assert [pid for pid in pids if pid in sandbox.pids()] == []
    assert ip not in sandbox.addresses and other.node_ip not in sandbox.addresses
    names = [n["metadata"]["name"] for n in kube.request("GET", "/api/v1/nodes")["items"]]
    assert "closing-node" not in names
