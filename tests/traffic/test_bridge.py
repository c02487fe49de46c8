"""A bridge carries one port across the sandbox's boundary, both ways, and leaves nothing behind.

Processes inside the sandbox (the EPP, the gateway implementation) must reach the embedded cluster's
API server with the cluster's own kubeconfig, and the suite must reach listeners inside. These tests
check both directions with real clients on each side: an HTTPS GET of /version with the kubeconfig's
CA and client certificate at the kubeconfig's own address, many connections at once, bytes passed
through unchanged (half-closes too), a listener on a pod address reached from a loopback port, the
refusal to touch anything but loopback outside, and that closing a bridge stops its process and
threads and removes its directory.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from conformance.traffic import netns
from conformance.traffic.bridge import ApiBridge, Bridge
from conformance.traffic.netns import Sandbox

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

POD = "10.244.0.5"
PY = [sys.executable, "-I", "-S", "-c"]
PROBE = [sys.executable, "-I", "-S", str(Path(__file__).with_name("probe.py"))]

# Inside the sandbox: GET URL with the CA and bearer token given, N times over T threads; print
# one JSON line: the statuses seen, the gitVersion of the first answer, the errors.
HTTPS_CLIENT = """
import json, ssl, sys, threading, urllib.request
url, ca, token, n, t = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ctx = ssl.create_default_context(cafile=ca)
statuses, versions, errors, lock = [], [], [], threading.Lock()
def work(count):
    for _ in range(count):
        try:
            request = urllib.request.Request(url + "/version", headers={"Authorization": "Bearer " + token})
            with urllib.request.urlopen(request, context=ctx, timeout=20) as r:
                body = json.load(r)
            with lock:
                statuses.append(r.status); versions.append(body["gitVersion"])
        except Exception as e:
            with lock:
                errors.append(repr(e))
threads = [threading.Thread(target=work, args=(n // t,)) for _ in range(t)]
[th.start() for th in threads]
[th.join() for th in threads]
print(json.dumps({"statuses": statuses, "version": versions[:1], "errors": errors[:3]}))
"""

# Inside the sandbox: send SIZE random bytes to HOST:PORT over each of N connections at once, half-close,
# read the answer; print the sha256 of what was sent and what came back, per connection.
ECHO_CLIENT = """
import hashlib, json, os, socket, sys, threading
host, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out, lock = [], threading.Lock()
def one():
    data = os.urandom(size)
    with socket.create_connection((host, port), timeout=20) as s:
        sender = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR)))
        sender.start()
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
        sender.join()
    with lock:
        out.append([hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest()])
threads = [threading.Thread(target=one) for _ in range(n)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(out))
"""

CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('connected')"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(stop_timeout=1) as sb:
        sb.add_address(POD)
        yield sb


@pytest.fixture(scope="module")
def credentials(cluster):
    """(server URL, CA file, bearer token) from the cluster's kubeconfig."""
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = config["clusters"][0]["cluster"]
    return server["server"], server["certificate-authority"], config["users"][0]["user"]["token"]


@pytest.fixture
def echo_server():
    """A TCP server on the machine's loopback that sends back what it gets, then half-closes; its port."""
    server = socket.create_server(("127.0.0.1", 0), backlog=256)

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn):
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def bridge_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("bridge-")]


def https_get(sb: Sandbox, credentials, n: int = 1, threads: int = 1) -> dict:
    out = sb.run([*PY, HTTPS_CLIENT, *credentials, str(n), str(threads)], timeout=120)
    return json.loads(out.stdout)


def test_the_api_server_answers_inside_at_the_kubeconfig_address(sandbox, credentials, cluster):
    server = credentials[0]
    assert urlsplit(server).hostname == "127.0.0.1"
    # Without a bridge the address inside is the sandbox's own loopback, where nothing listens.
    assert "ConnectionRefusedError" in https_get(sandbox, credentials)["errors"][0]
    with ApiBridge(sandbox, server) as bridge:
        assert bridge.url == server and bridge.inside == bridge.outside
        assert sandbox.contains(bridge.pid)  # the end inside is inside
        got = https_get(sandbox, credentials)
    assert got["errors"] == [] and got["statuses"] == [200]
    assert got["version"][0].startswith("v1.")


def test_many_https_clients_at_once(sandbox, credentials):
    with ApiBridge(sandbox, credentials[0]) as bridge:
        started = time.monotonic()
        got = https_get(sandbox, credentials, n=200, threads=40)
        elapsed = time.monotonic() - started
        assert got["errors"] == [], got["errors"]
        assert got["statuses"] == [200] * 200
        assert bridge.accepted == 200
        deadline = time.monotonic() + 5
        while bridge.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bridge.open_connections == 0
    assert elapsed < 60


def test_bytes_pass_unchanged_both_ways_with_half_close(sandbox, echo_server):
    with Bridge.into(sandbox, echo_server):
        out = sandbox.run([*PY, ECHO_CLIENT, "127.0.0.1", str(echo_server), "20", str(1 << 20)], timeout=120)
    pairs = json.loads(out.stdout)
    assert len(pairs) == 20
    assert all(sent == got for sent, got in pairs)


def test_a_missing_target_ends_the_connection_at_once(sandbox):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import socket, sys, time; t = time.monotonic();"
            "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5); s.settimeout(5);"
            "print(repr(s.recv(10)), round(time.monotonic() - t, 1))")
    with Bridge.into(sandbox, port):
        out = sandbox.run([*PY, code, str(port)]).stdout.split()
    assert out[0] == "b''" and float(out[1]) < 2


def test_a_listener_on_a_pod_address_is_reached_from_a_loopback_port(sandbox):
    server = sandbox.popen([*PROBE, "serve", POD, "3000"], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    try:
        with Bridge.out_of(sandbox, 3000, POD) as bridge:
            host, port = bridge.outside
            assert host == "127.0.0.1" and port > 0
            assert bridge.outside_url == f"http://127.0.0.1:{port}"
            for _ in range(3):
                with socket.create_connection((host, port), timeout=5) as conn:
                    assert conn.recv(100) == f"served by {POD}".encode()
            # Its unix socket reaches the same listener, with no pump of the suite's in between.
            before = bridge.accepted
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(5)
                conn.connect(bridge.socket)
                assert conn.recv(100) == f"served by {POD}".encode()
            assert bridge.accepted == before
            # The pod address itself is still not on the machine.
            with socket.socket() as s, pytest.raises(OSError):
                s.bind((POD, 0))
    finally:
        server.terminate()
        server.wait()


def test_the_end_outside_touches_loopback_only(sandbox):
    with pytest.raises(ValueError, match="loopback"):
        Bridge.into(sandbox, 6443, "10.96.0.1")
    with pytest.raises(ValueError, match="loopback"):
        Bridge.out_of(sandbox, 3000, POD, outside_host="0.0.0.0")
    with pytest.raises(ValueError, match="loopback"):
        ApiBridge(sandbox, "https://192.0.2.10:6443")


def test_closing_leaves_nothing(sandbox, echo_server):
    before = set(sandbox.pids())
    bridge = Bridge.into(sandbox, echo_server).start()
    pid, directory = bridge.pid, bridge.dir
    assert alive(pid) and os.path.isdir(directory) and sandbox.contains(pid)
    # An open connection through it is cut too.
    # Cut means end of stream or a reset, whichever the close gives (both end the client's wait at once).
    holder = sandbox.popen([*PY, "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])));"
                            "print('connected', flush=True)\n"
                            "try: print('cut' if s.recv(10) == b'' else 'data', flush=True)\n"
                            "except ConnectionResetError: print('cut', flush=True)", str(echo_server)],
                           stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "connected"
    bridge.close()
    assert holder.stdout.readline().strip() == "cut"
    holder.wait(5)
    assert not alive(pid)
    assert not os.path.exists(directory)
    assert bridge_threads() == []
    assert set(sandbox.pids()) == before
    out = sandbox.run([*PY, CONNECT, "127.0.0.1", str(echo_server)], check=False)
    assert "ConnectionRefusedError" in out.stderr
    bridge.close()  # twice is harmless


def test_the_end_inside_goes_when_the_suite_does(sandbox, echo_server):
    with Bridge.into(sandbox, echo_server) as bridge:
        bridge.process.stdin.close()  # as when the suite's process dies: its end of the lifeline closes
        bridge.process.wait(5)
        assert not alive(bridge.pid)


def test_a_port_taken_inside_is_one_line(sandbox, echo_server):
    blocker = sandbox.popen([*PROBE, "serve", "127.0.0.1", "3999"], stdout=subprocess.PIPE, text=True)
    assert blocker.stdout.readline().strip() == "listening"
    try:
        with pytest.raises(RuntimeError, match=r"did not start .*Address already in use"):
            Bridge.into(sandbox, echo_server, inside_port=3999).start()
    finally:
        blocker.terminate()
        blocker.wait()
    assert bridge_threads() == []
