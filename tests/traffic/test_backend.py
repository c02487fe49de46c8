"""The model-server stand-in answers like Gateway API's echo server, and serves the metrics an EPP reads.

Upstream GIE's conformance reads the echo server's JSON (pod, namespace, httpPort) to tell which
pod and port served a request, and its EPP polls each pod's /metrics for vLLM's gauges. These tests
check both, on loopback (the wire details) and on pod addresses inside a network sandbox (two ports,
as a data-parallel pod has), and that the backend starts fast and stops on SIGTERM.
"""

import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conformance.traffic import netns
from conformance.traffic.netns import Sandbox, start_process

BACKEND = [sys.executable, "-S", "-m", "conformance.traffic.backend"]
BODY = json.dumps({"model": "conformance-fake-model", "prompt": "Write as if you were a critic: San Francisco"})
# The metric names upstream's EPP v1.5.0 reads by default (pkg/epp/server/options.go), plus the KV
# cache name of EPPs before v1.3; Prometheus' legacy name rule, which that EPP's parser applies.
VLLM = ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc", "vllm:lora_requests_info", "vllm:cache_config_info"]
LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# A client run inside the sandbox: the requests (JSON on argv) over one kept-alive connection.
CLIENT = """
import http.client, json, sys
answers = []
for host, port, method, path, body in json.loads(sys.argv[1]):
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    answers.append({"status": resp.status, "body": resp.read().decode()})
    conn.close()
print(json.dumps(answers))
"""


def start(*args: str, sandbox: Sandbox | None = None) -> tuple[subprocess.Popen, list[str]]:
    """Start a backend; return it and the endpoints its one line says it listens on."""
    proc = start_process([*BACKEND, *args], sandbox=sandbox, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = proc.stdout.readline().split()
    assert line[:1] == ["listening"], proc.stderr.read()
    return proc, line[1:]


@pytest.fixture(scope="module")
def loopback():
    """One backend on loopback, two ports, for the wire details."""
    proc, endpoints = start("--address", "127.0.0.1", "--port", "0", "--port", "0", "--pod", "model-server-0",
                            "--namespace", "ns")
    yield [int(e.rsplit(":", 1)[1]) for e in endpoints]
    proc.terminate()
    proc.wait(5)


def call(port: int, method: str = "POST", path: str = "/v1/completions", body: str | bytes | None = BODY,
         headers: dict | None = None, conn: http.client.HTTPConnection | None = None):
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    return resp, resp.read()


def test_a_post_is_answered_with_who_served_it(loopback):
    resp, raw = call(loopback[0], headers={"X-Test": "a", "test-epp-endpoint-selection": "10.244.0.5"})
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
    answer = json.loads(raw)
    # echo-basic's fields (upstream's roundtripper reads path, host, method, proto, headers, httpPort,
    # namespace and pod), in its order, then this backend's own.
    assert list(answer) == ["path", "host", "method", "proto", "headers", "httpPort", "namespace", "ingress",
                            "service", "pod", "endpoint", "bodyLength", "bodySha256"]
    assert answer["path"] == "/v1/completions" and answer["method"] == "POST" and answer["proto"] == "HTTP/1.1"
    assert answer["host"] == f"127.0.0.1:{loopback[0]}"
    assert (answer["pod"], answer["namespace"], answer["httpPort"]) == ("model-server-0", "ns", str(loopback[0]))
    assert answer["endpoint"] == f"127.0.0.1:{loopback[0]}"
    assert answer["bodyLength"] == len(BODY)
    # Go's header map: canonical names, lists of values, no Host.
    assert answer["headers"]["X-Test"] == ["a"] and answer["headers"]["Test-Epp-Endpoint-Selection"] == ["10.244.0.5"]
    assert "Host" not in answer["headers"]


def test_the_second_port_says_so(loopback):
    answer = json.loads(call(loopback[1], "GET", "/")[1])
    assert answer["httpPort"] == str(loopback[1]) and answer["endpoint"] == f"127.0.0.1:{loopback[1]}"


def test_keep_alive_and_chunked_bodies(loopback):
    conn = http.client.HTTPConnection("127.0.0.1", loopback[0], timeout=5)
    sent = [BODY.encode()[:20], BODY.encode()[20:]]
    resp, raw = call(loopback[0], body=iter(sent), conn=conn)  # an iterable: sent chunked
    answer = json.loads(raw)
    assert answer["bodyLength"] == len(BODY) and "Transfer-Encoding" not in answer["headers"]
    first = conn.sock
    for _ in range(3):  # the same connection serves the next requests
        assert json.loads(call(loopback[0], conn=conn)[1])["bodyLength"] == len(BODY)
    assert conn.sock is first
    conn.close()


def test_echo_basic_extras(loopback):
    assert call(loopback[0], "GET", "/health", None)[1] == b"OK"
    assert call(loopback[0], "GET", "/status/503", None)[0].status == 503
    resp, _ = call(loopback[0], headers={"X-Echo-Set-Header": "X-One: 1, X-Two: 2"})
    assert (resp.getheader("X-One"), resp.getheader("X-Two")) == ("1", "2")
    began = time.monotonic()
    assert call(loopback[0], "GET", "/?delay=200ms", None)[0].status == 200
    assert time.monotonic() - began >= 0.2
    assert call(loopback[0], "GET", "/?delay=soon", None)[0].status == 500


def test_metrics_have_the_names_the_epp_reads(loopback):
    slow = threading.Thread(target=call, args=(loopback[0], "POST", "/?delay=500ms"))
    slow.start()
    time.sleep(0.2)
    resp, raw = call(loopback[1], "GET", "/metrics", None)
    slow.join()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    text = raw.decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert types == dict.fromkeys(VLLM, "gauge")
    samples = {m[0]: (m[1], float(m[2])) for m in re.findall(r"^([^#\s{]+)\{(.*)\} (\S+)$", text, re.M)}
    assert set(samples) == set(VLLM) and all(LEGACY_NAME.fullmatch(name) for name in samples)
    assert samples["vllm:num_requests_running"][1] == 1  # the slow request, in flight on the other port
    assert samples["vllm:num_requests_waiting"][1] == 0 and samples["vllm:kv_cache_usage_perc"][1] == 0
    lora_labels, lora_value = samples["vllm:lora_requests_info"]
    assert set(re.findall(r'(\w+)="', lora_labels)) == {"max_lora", "running_lora_adapters", "waiting_lora_adapters"}
    assert lora_value > 1e9  # a timestamp, as vLLM's: the EPP keeps the newest series
    assert dict(re.findall(r'(\w+)="(\d+)"', samples["vllm:cache_config_info"][0])) == {
        "block_size": "16", "num_gpu_blocks": "1024"}


@pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))
def test_two_ports_on_a_pod_address_inside_the_sandbox():
    with Sandbox(stop_timeout=1) as sandbox:
        sandbox.add_address("10.244.0.5")
        began = time.monotonic()
        proc, endpoints = start("--address", "10.244.0.5", "--port", "3000", "--port", "3002",
                                "--pod", "dp-0", "--namespace", "backend", sandbox=sandbox)
        took = time.monotonic() - began
        assert endpoints == ["10.244.0.5:3000", "10.244.0.5:3002"]
        assert sandbox.contains(proc.pid)
        requests = [["10.244.0.5", port, "POST", "/", BODY] for port in (3000, 3002)]
        requests.append(["10.244.0.5", 3002, "GET", "/metrics", None])
        answers = json.loads(sandbox.run([sys.executable, "-S", "-c", CLIENT, json.dumps(requests)]).stdout)
        assert [a["status"] for a in answers] == [200, 200, 200]
        served = [json.loads(a["body"]) for a in answers[:2]]
        assert [(s["pod"], s["namespace"], s["httpPort"], s["endpoint"]) for s in served] == [
            ("dp-0", "backend", "3000", "10.244.0.5:3000"), ("dp-0", "backend", "3002", "10.244.0.5:3002")]
        assert "vllm:num_requests_waiting{" in answers[2]["body"]
        print(f"backend listening on two pod ports {took * 1000:.0f} ms after start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0


def test_a_taken_port_is_one_line_and_exit_1(loopback):
    proc = start_process([*BACKEND, "--address", "127.0.0.1", "--port", str(loopback[0])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 1 and out == ""
    assert err.startswith("cannot listen on 127.0.0.1: ") and err.count("\n") == 1
