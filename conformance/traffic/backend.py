"""A model-server stand-in that says who served each request: the traffic tier's backend.

Why: the traffic rules (SPEC section 10) judge where a gateway sent a request. Upstream GIE's
conformance runs Gateway API's echo server (`conformance/echo-basic`, the image the suite's
--model-server-image defaults to) as its model servers and reads the JSON it answers: the pod and
namespace that served, and the port (`httpPort`, for data-parallel pools with several target
ports). Its endpoint picker (EPP) also polls each pod's `/metrics` for vLLM's Prometheus metrics.
This module answers both, on the pod addresses it is given, with the standard library alone, so a
pod of the embedded cluster starts in a few tens of milliseconds, needs no image and no build.

Wire format (echo-basic's, image v20251106-v1.3.0-263-g47c3435c, whose `RequestAssertions` and
`Context` structs give the JSON fields; upstream's roundtripper reads path, host, method, proto,
headers, httpPort, namespace, pod): any request to any path other than the ones below, any method,
gets 200 and an indented JSON object

    {"path": request URI, "host": Host, "method": ..., "proto": "HTTP/1.1",
     "headers": {canonical name: [values]},          # Host and Transfer-Encoding excluded, as Go does
     "httpPort": "3000", "namespace": ..., "ingress": "", "service": "", "pod": ...,
     "endpoint": "10.244.0.5:3000",                  # extension: the address and port that served
     "bodyLength": n, "bodySha256": hex}             # extension: the request body as it arrived

with echo-basic's extras: `?delay=<Go duration>` waits first, `X-Echo-Set-Header: Name: value, ...`
sets response headers, `/status/NNN` answers that code, `/health` answers `OK` (the readiness
endpoint). Request bodies may be sent with Content-Length or chunked; connections are kept alive
(HTTP/1.1).

h2c (rule T8, pools with `appProtocol: kubernetes.io/h2c`): echo-basic also serves cleartext HTTP/2
with prior knowledge on H2C_PORT (default 3001), where it echoes only HTTP/2 requests (`"proto":
"HTTP/2.0"`) and answers anything else 400 `Expected h2c request`. `--h2c-port` does the same here
(`conformance.traffic.h2c`; the HTTP/1.1 Upgrade to h2c is not offered); `httpPort` names the port
that served, the h2c one included, and `GET /metrics` is served there over HTTP/1.1 too, for the EPP.

One deliberate difference: `GET /metrics` (echo-basic would echo it) serves Prometheus text with
the vLLM gauges the EPP reads by default (GIE v1.4.0 `pkg/epp/server/options.go`):
`vllm:num_requests_waiting`, `vllm:num_requests_running` (the requests in flight here),
`vllm:kv_cache_usage_perc` (and `vllm:gpu_cache_usage_perc`, the name EPPs before v1.3 read),
`vllm:lora_requests_info` (labels max_lora, running_lora_adapters, waiting_lora_adapters; value the
start time) and `vllm:cache_config_info` (labels block_size, num_gpu_blocks).

Run it as `python -m conformance.traffic.backend --address IP --port P [--port P2 ...] [--h2c-port P3
...] --pod NAME --namespace NS`, inside a network Sandbox when IP is a pod address. It prints one line,
`listening IP:P [IP:P2 ...]`, once every port is bound, and exits 0 on SIGTERM or SIGINT. Without
--port it serves HTTP_PORT (echo-basic's variable), else 3000; without --h2c-port, h2c on H2C_PORT
when that is set; POD_NAME and NAMESPACE are read when --pod and --namespace are not given, as
echo-basic reads them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import h2c

DEFAULT_PORT = 3000  # echo-basic's HTTP_PORT default
DEFAULT_H2C_PORT = 3001  # echo-basic's H2C_PORT default
MODEL_NAME = "conformance-fake-model"  # upstream's requests ask for this model
GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class Identity:
    """Who this backend is, and what it counts (shared by every port's server)."""

    def __init__(self, pod: str, namespace: str, ingress: str = "", service: str = ""):
        self.pod, self.namespace, self.ingress, self.service = pod, namespace, ingress, service
        self.started = time.time()
        self._lock = threading.Lock()
        self.running = 0  # echo requests in flight
        self.served = 0  # echo requests answered

    def enter(self) -> None:
        with self._lock:
            self.running += 1

    def leave(self) -> None:
        with self._lock:
            self.running -= 1
            self.served += 1

    def metrics(self) -> str:
        """vLLM's gauges, in the Prometheus text format the EPP parses."""
        model = f'model_name="{MODEL_NAME}"'
        gauges = [
            ("vllm:num_requests_running", "Number of requests in model execution batches.", model, self.running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", model, 0),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", model, 0.0),
            ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", model, 0.0),
            ("vllm:lora_requests_info", "Running stats on lora requests.",
             'max_lora="1",running_lora_adapters="",waiting_lora_adapters=""', self.started),
            ("vllm:cache_config_info", "Information of the LLMCacheConfig.",
             'block_size="16",num_gpu_blocks="1024"', 1.0),
        ]
        lines = []
        for name, help_text, labels, value in gauges:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)!r}"]
        return "\n".join(lines) + "\n"


def canonical(name: str) -> str:
    """Go's CanonicalMIMEHeaderKey: x-foo-bar -> X-Foo-Bar (names with other characters are kept)."""
    if not re.fullmatch(r"[A-Za-z0-9-]+", name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def go_duration(text: str) -> float:
    """Seconds in a Go duration such as 1s, 150ms, 1m30s (ValueError if it is not one)."""
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f'time: invalid duration "{text}"')
    return sum(float(n) * GO_DURATION_UNITS[u] for n, u in parts)


class Handler(BaseHTTPRequestHandler):
    """One port's requests; `server.identity` and `server.endpoint` say who answers."""

    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length

    def version_string(self) -> str:
        return "conformance-backend"

    def setup(self) -> None:
        super().setup()
        # Headers and body are written separately: without this, Nagle and delayed ACKs add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def handle_one_request(self) -> None:
        # Every method is echoed, whatever its name (do_GET, do_POST, ... are not used).
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if self.server.h2c and self.raw_requestline == h2c.PREFACE[:16]:
                if self.rfile.read(8) == h2c.PREFACE[16:]:
                    self.h2c()
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self.route()
            self.wfile.flush()
        except (TimeoutError, ConnectionError):
            self.close_connection = True

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()  # the CRLF after the chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def answer(self, code: int, body: bytes, content_type: str | None, extra: list[tuple[str, str]] = ()) -> None:
        self.send_response(code)
        for name, value in extra:
            self.send_header(name, value)
        if content_type:
            self.send_header("Content-Type", content_type)
            self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route(self) -> None:
        body = self.read_body()
        server: Server = self.server
        if server.h2c and urlsplit(self.path).path != "/metrics":  # echo-basic's h2c server, asked HTTP/1.1
            self.answer(400, b"Expected h2c request", "text/plain; charset=utf-8")
            return
        code, content, content_type, extra = respond(server, self.command, self.path, self.headers.get("Host", ""),
                                                     self.request_version, self.headers.items(), body)
        self.answer(code, content, content_type, extra)

    def h2c(self) -> None:
        """Serve the connection as HTTP/2 (its preface read), each stream answered like a request here."""
        server: Server = self.server

        def on_stream(fields: list[tuple[str, str]], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            pseudo = {k: v for k, v in fields if k.startswith(":")}
            code, content, content_type, extra = respond(
                server, pseudo.get(":method", ""), pseudo.get(":path", "/"), pseudo.get(":authority", ""),
                "HTTP/2.0", [(k, v) for k, v in fields if not k.startswith(":")], body)
            headers = [*extra, *([("content-type", content_type), ("x-content-type-options", "nosniff")]
                                 if content_type else [])]
            return code, headers, content if pseudo.get(":method") != "HEAD" else b""

        h2c.Connection(self.rfile, self.wfile, on_stream).serve()


def respond(server: Server, method: str, target: str, host: str, proto: str, header_items, body: bytes
            ) -> tuple[int, bytes, str | None, list[tuple[str, str]]]:
    """What echo-basic answers a request, on either protocol: (code, body, content type, extra headers)."""
    url = urlsplit(target)
    path = re.sub("//", "/", url.path)  # echo-basic's preserveSlashes
    if path == "/health":
        return 200, b"OK", "text/plain; charset=utf-8", []
    if path.startswith("/status/"):
        match = re.fullmatch(r"/status/(\d\d\d)", target)
        return (int(match[1]) if match else 400), b"", None, []
    if path == "/metrics" and method == "GET":
        return 200, server.identity.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8", []
    identity = server.identity
    identity.enter()
    try:
        if delay := parse_qs(url.query).get("delay", [""])[0]:
            try:
                time.sleep(go_duration(delay))
            except ValueError as e:
                return 500, json.dumps({"message": str(e)}).encode(), "application/json", []
        headers: dict[str, list[str]] = {}
        for name, value in header_items:
            key = canonical(name)
            if key not in ("Host", "Transfer-Encoding"):  # Go moves these out of Request.Header
                headers.setdefault(key, []).append(value)
        assertions = {
            "path": target,
            "host": host,
            "method": method,
            "proto": proto,
            "headers": headers,
            "httpPort": str(server.server_address[1]),
            "namespace": identity.namespace,
            "ingress": identity.ingress,
            "service": identity.service,
            "pod": identity.pod,
            "endpoint": server.endpoint,
            "bodyLength": len(body),
            "bodySha256": hashlib.sha256(body).hexdigest(),
        }
        extra = []
        for spec in headers.get("X-Echo-Set-Header", []):
            for pair in spec.split(","):
                name, _, value = pair.strip().partition(":")
                extra.append((name, value.strip()))
        return 200, json.dumps(assertions, indent=1).encode(), "application/json", extra
    finally:
        identity.leave()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: str, port: int, identity: Identity, verbose: bool = False, h2c: bool = False):
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.identity, self.verbose, self.h2c = identity, verbose, h2c
        super().__init__((address, port), Handler)
        port = self.server_address[1]  # the one bound, when 0 was asked for
        self.endpoint = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.traffic.backend", description=__doc__.split("\n")[0])
    parser.add_argument("--address", required=True, help="the pod address to serve on (never 0.0.0.0)")
    parser.add_argument("--port", type=int, action="append", help="a port to serve (repeat for more; 0: any "
                        f"free port; default: HTTP_PORT, else {DEFAULT_PORT})")
    parser.add_argument("--h2c-port", type=int, action="append", help="a port to serve h2c on (cleartext HTTP/2 "
                        "with prior knowledge; HTTP/1.1 there gets 400, as on echo-basic's H2C_PORT; repeat for "
                        "more; default: H2C_PORT when set, else none)")
    parser.add_argument("--pod", default=os.environ.get("POD_NAME", ""))
    parser.add_argument("--namespace", default=os.environ.get("NAMESPACE", ""))
    parser.add_argument("--verbose", action="store_true", help="log each request on stderr")
    args = parser.parse_args(argv)
    ports = args.port or [int(os.environ.get("HTTP_PORT") or DEFAULT_PORT)]
    h2c_ports = args.h2c_port or ([int(os.environ["H2C_PORT"])] if os.environ.get("H2C_PORT") else [])
    identity = Identity(args.pod, args.namespace, os.environ.get("INGRESS_NAME", ""),
                        os.environ.get("SERVICE_NAME", ""))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        both = [(port, False) for port in ports] + [(port, True) for port in h2c_ports]
        unique = [(port, h2) for i, (port, h2) in enumerate(both) if port == 0 or port not in [p for p, _ in both[:i]]]
        servers = [Server(args.address, port, identity, args.verbose, h2) for port, h2 in unique]
    except OSError as e:
        print(f"cannot listen on {args.address}: {e}", file=sys.stderr, flush=True)
        return 1
    for server in servers:
        threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True).start()
    print("listening", *(s.endpoint for s in servers), flush=True)
    stop.wait()
    for server in servers:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
