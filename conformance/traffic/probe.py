"""A kubelet's gRPC readiness probe, run inside the network sandbox, with the standard library alone.

Why: a Pod whose readiness probe is `grpc` is Ready, on a real node, only while the gRPC health service
on that port answers SERVING. Upstream's endpoint picker (the traffic tier's EPP Pods) answers
NOT_SERVING until it has read its InferencePool, though its health port listens from its start, so a
port that listens says less than the probe does: a gateway would be judged while the picker it must
ask still refuses every request. The embedded cluster's kubelet stand-in (`kubelet.py`) therefore
asks the health service itself, from inside the sandbox where the Pod's address lives: it forks this
module from its fork server (`forkserver.PROGRAMS`), a few milliseconds a probe.

`grpc_health()` asks grpc.health.v1.Health/Check over plain h2c (HTTP/2 by hand, with the frames and
header encoding of `h2c`; no grpcio); the suite's EPP tests use it too. `main(["HOST", "PORT",
"SERVICE"])` is the probe: exit status 0 when the answer is SERVING, else the answer's number in
`ANSWERS`.
"""

from __future__ import annotations

import socket
import struct

from . import h2c

_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def grpc_health(host: str, port: int, service: str = "", timeout: float = 2.0) -> str:
    """Ask grpc.health.v1.Health/Check over plain h2c; the status name (SERVING, NOT_SERVING, ...), or
    `ERROR` when the call ended without a message. Raises OSError when nothing answers."""
    headers = h2c.encode([
        (":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"),
        (":authority", f"{host}:{port}"), ("content-type", "application/grpc"), ("te", "trailers")])
    svc = service.encode()
    request = (b"\x0a" + h2c.encode_int(len(svc), 7) + svc) if svc else b""  # field 1 (service), string
    message = b"\x00" + struct.pack(">I", len(request)) + request
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(h2c.PREFACE + h2c.frame(h2c.SETTINGS, 0, 0)
                     + h2c.frame(h2c.HEADERS, h2c.END_HEADERS, 1, headers)
                     + h2c.frame(h2c.DATA, h2c.END_STREAM, 1, message))
        reader = sock.makefile("rb")
        body = b""
        while True:
            head = reader.read(9)
            if len(head) < 9:
                raise ConnectionError("the gRPC server closed the connection before it answered")
            length = int.from_bytes(head[:3], "big")
            kind, flags, stream = head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = reader.read(length)
            if kind == h2c.SETTINGS and not flags & h2c.ACK:
                sock.sendall(h2c.frame(h2c.SETTINGS, h2c.ACK, 0))
            elif kind == h2c.PING and not flags & h2c.ACK:
                sock.sendall(h2c.frame(h2c.PING, h2c.ACK, 0, payload))
            elif kind == h2c.GOAWAY or (kind == h2c.RST_STREAM and stream == 1):
                return "ERROR"
            elif stream == 1 and kind == h2c.DATA:
                if flags & h2c.PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                body += payload
            if stream == 1 and kind in (h2c.DATA, h2c.HEADERS) and flags & h2c.END_STREAM:
                break
    if len(body) < 5:
        return "ERROR"
    msg = body[5:5 + int.from_bytes(body[1:5], "big")]
    status = 0
    if msg[:1] == b"\x08":  # field 1 (status), varint: one byte for these values
        status = msg[1]
    return _HEALTH_STATUS.get(status, str(status))


# A probe's exit status -> what the health service said (0: SERVING; ERROR: the call ended without a message).
NO_ANSWER = "no answer"
ANSWERS = {0: "SERVING", 1: "NOT_SERVING", 2: "SERVICE_UNKNOWN", 3: "UNKNOWN", 4: "ERROR", 5: NO_ANSWER}
_CODES = {answer: code for code, answer in ANSWERS.items()}


def main(argv: list[str]) -> int:
    host, port, service = argv[0], int(argv[1]), argv[2] if len(argv) > 2 else ""
    try:
        status = grpc_health(host, port, service, timeout=1.0)
    except OSError:
        return _CODES[NO_ANSWER]
    return _CODES.get(status, _CODES["UNKNOWN"])  # (a status number this module has no name for)
