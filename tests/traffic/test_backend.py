"""The model-server stand-in answers like Gateway API's echo server, and serves the metrics an EPP reads.

Upstream GIE's conformance reads the echo server's JSON (pod, namespace, httpPort) to tell which
pod and port served a request, and its EPP polls each pod's /metrics for vLLM's gauges. These tests
check both, on loopback (the wire details) and on pod addresses inside a network sandbox (two ports,
as a data-parallel pod has), and that the backend starts fast and stops on SIGTERM.
"""

import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conformance.traffic import h2c, netns
from conformance.traffic.netns import Sandbox, start_process

BACKEND = [sys.executable, "-S", "-m", "conformance.traffic.backend"]
BODY = json.dumps({"model": "conformance-fake-model", "prompt": "Write as if you were a critic: San Francisco"})
# The metric names upstream's EPP v1.4.0 reads by default (pkg/epp/server/options.go), plus the KV
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


# -- h2c (rule T8: pools with appProtocol kubernetes.io/h2c) -------------------------------------------


@pytest.fixture(scope="module")
def h2c_port():
    """A backend with an HTTP/1.1 port and an h2c one, as echo-basic's HTTP_PORT and H2C_PORT."""
    proc, endpoints = start("--address", "127.0.0.1", "--port", "0", "--h2c-port", "0", "--pod", "model-server-0",
                            "--namespace", "ns")
    yield int(endpoints[1].rsplit(":", 1)[1])
    proc.terminate()
    proc.wait(5)


def h2_exchange(port: int, requests: list[tuple[list[tuple[str, str]], bytes]]) -> dict[int, tuple[dict, bytes]]:
    """Send the requests on one h2c connection, as streams 1, 3, ... all at once; {stream: (headers, body)}."""
    out = bytearray(h2c.PREFACE + h2c.frame(h2c.SETTINGS, 0, 0))
    for i, (headers, body) in enumerate(requests):
        stream = 2 * i + 1
        out += h2c.frame(h2c.HEADERS, h2c.END_HEADERS | (0 if body else h2c.END_STREAM), stream, h2c.encode(headers))
        if body:
            out += h2c.frame(h2c.DATA, h2c.END_STREAM, stream, body)
    answers: dict[int, list] = {}
    decoder, done = h2c.Decoder(), set()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(out)
        rfile = sock.makefile("rb")
        while len(done) < len(requests):
            head = rfile.read(9)
            assert len(head) == 9, f"the connection closed with streams {sorted(done)} of {len(requests)} answered"
            kind, flags, stream = head[3], head[4], int.from_bytes(head[5:], "big")
            payload = rfile.read(int.from_bytes(head[:3], "big"))
            if kind == h2c.HEADERS:
                answers[stream] = [dict(decoder.decode(payload)), b""]
            elif kind == h2c.DATA:
                answers[stream][1] += payload
            if kind in (h2c.HEADERS, h2c.DATA) and flags & h2c.END_STREAM:
                done.add(stream)
    return {stream: (headers, body) for stream, (headers, body) in answers.items()}


def test_hpack_decodes_the_rfc_examples():
    """RFC 7541 C.4: three requests with Huffman strings, sharing one dynamic table."""
    decoder = h2c.Decoder()
    assert decoder.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"))[-1] == (":authority", "www.example.com")
    assert decoder.decode(bytes.fromhex("828684be5886a8eb10649cbf"))[-2:] == [
        (":authority", "www.example.com"), ("cache-control", "no-cache")]
    assert decoder.decode(bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))[-1] == (
        "custom-key", "custom-value")
    assert [name for name, _ in decoder.table] == ["custom-key", "cache-control", ":authority"]


def test_h2c_port_echoes_over_http2_streams_at_once(h2c_port):
    request = [(":method", "POST"), (":scheme", "http"), (":path", "/v1/completions"), (":authority", "pool"),
               ("content-type", "application/json"), ("test-epp-endpoint-selection", "10.244.0.5:3001")]
    answers = h2_exchange(h2c_port, [(request, BODY.encode()), (request[:2] + [(":path", "/health")] + request[3:],
                                                                b"")])
    headers, body = answers[1]
    assert headers[":status"] == "200" and headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert (answer["proto"], answer["method"], answer["path"], answer["host"]) == (
        "HTTP/2.0", "POST", "/v1/completions", "pool")
    assert (answer["pod"], answer["httpPort"], answer["bodyLength"]) == ("model-server-0", str(h2c_port), len(BODY))
    assert answer["headers"]["Test-Epp-Endpoint-Selection"] == ["10.244.0.5:3001"]
    assert not any(name.startswith(":") for name in answer["headers"])
    assert answers[3] == ({":status": "200", "content-type": "text/plain; charset=utf-8",
                           "x-content-type-options": "nosniff", "content-length": "2"}, b"OK")


def test_http1_on_the_h2c_port_is_refused_as_echo_basic_does(h2c_port):
    resp, raw = call(h2c_port)
    assert (resp.status, raw) == (400, b"Expected h2c request")
    assert call(h2c_port, "GET", "/metrics", None)[0].status == 200  # the EPP's metrics, on every port


@pytest.mark.skipif(not shutil.which("curl") or "HTTP2" not in subprocess.run(
    ["curl", "--version"], capture_output=True, text=True).stdout, reason="no curl with HTTP/2")
def test_curl_with_prior_knowledge(h2c_port):
    """nghttp2's HPACK (Huffman strings, the dynamic table) and a body of several DATA frames, as a real
    HTTP/2 client sends them. (One URL per curl: curl 7.88 fails to reuse an HTTP/2 connection for a
    second URL, whatever the server.)"""
    run = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-X", "POST", "-d", BODY * 300,
                          "-H", "Content-Type: application/json", f"http://127.0.0.1:{h2c_port}/v1/completions"],
                         capture_output=True, text=True, timeout=20)
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert (answer["proto"], answer["bodyLength"], answer["headers"]["User-Agent"][0][:5]) == (
        "HTTP/2.0", len(BODY) * 300, "curl/")
