"""A kubelet's gRPC readiness probe, run inside the network sandbox, with the standard library alone.

Why: a Pod whose readiness probe is `grpc` is Ready, on a real node, only while the gRPC health service
on that port answers SERVING. Upstream's endpoint picker (the traffic tier's EPP Pods) answers
NOT_SERVING until it has read its InferencePool, though its health port listens from its start, so a
port that listens says less than the probe does: a gateway would be judged while the picker it must
ask still refuses every request. The embedded cluster's kubelet stand-in (`kubelet.py`) therefore
asks the health service itself, from inside the sandbox where the Pod's address lives: it forks this
module from its fork server (`forkserver.PROGRAMS`), a few milliseconds a probe.

`grpc_health()` asks grpc.health.v1.Health/Check over plain h2c (HTTP/2 written by hand, no grpcio);
the suite's EPP tests use it too. `main(["HOST", "PORT", "SERVICE"])` is the probe: exit status 0
when the answer is SERVING, else the status's number in `ANSWERS`.
"""

from __future__ import annotations

import socket
import struct

_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
_END_STREAM, _ACK, _END_HEADERS, _PADDED = 0x1, 0x1, 0x4, 0x8


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def _hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out, value = [first | limit], value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes((*out, value))


def _hpack_literal(name: str, value: str) -> bytes:
    """A header field as 'literal without indexing, new name', strings not Huffman-coded (RFC 7541 6.2.2)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + _hpack_int(len(n), 7) + n + _hpack_int(len(v), 7) + v


def grpc_health(host: str, port: int, service: str = "", timeout: float = 2.0) -> str:
    """Ask grpc.health.v1.Health/Check over plain h2c; the status name (SERVING, NOT_SERVING, ...), or
    `ERROR` when the call ended without a message. Raises OSError when nothing answers."""
    headers = b"".join(_hpack_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"),
        (":authority", f"{host}:{port}"), ("content-type", "application/grpc"), ("te", "trailers")))
    svc = service.encode()
    request = (b"\x0a" + _hpack_int(len(svc), 7) + svc) if svc else b""  # field 1 (service), string
    message = b"\x00" + struct.pack(">I", len(request)) + request
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(_PREFACE + _frame(_SETTINGS, 0, 0) + _frame(_HEADERS, _END_HEADERS, 1, headers)
                     + _frame(_DATA, _END_STREAM, 1, message))
        reader = sock.makefile("rb")
        body = b""
        while True:
            head = reader.read(9)
            if len(head) < 9:
                raise ConnectionError("the gRPC server closed the connection before it answered")
            length = int.from_bytes(head[:3], "big")
            kind, flags, stream = head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = reader.read(length)
            if kind == _SETTINGS and not flags & _ACK:
                sock.sendall(_frame(_SETTINGS, _ACK, 0))
            elif kind == _PING and not flags & _ACK:
                sock.sendall(_frame(_PING, _ACK, 0, payload))
            elif kind == _GOAWAY or (kind == _RST_STREAM and stream == 1):
                return "ERROR"
            elif stream == 1 and kind == _DATA:
                if flags & _PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                body += payload
            if stream == 1 and kind in (_DATA, _HEADERS) and flags & _END_STREAM:
                break
    if len(body) < 5:
        return "ERROR"
    msg = body[5:5 + int.from_bytes(body[1:5], "big")]
    status = 0
    if msg[:1] == b"\x08":  # field 1 (status), varint: one byte for these values
        status = msg[1]
    return _HEALTH_STATUS.get(status, str(status))


# A probe's exit status -> what the health service said (0: SERVING; ERROR: the call ended without a message).
ANSWERS = {0: "SERVING", 1: "NOT_SERVING", 2: "SERVICE_UNKNOWN", 3: "UNKNOWN", 4: "ERROR", 5: "no answer"}


def main(argv: list[str]) -> int:
    host, port, service = argv[0], int(argv[1]), argv[2] if len(argv) > 2 else ""
    try:
        status = grpc_health(host, port, service, timeout=1.0)
    except OSError:
        return 5
    codes = {answer: code for code, answer in ANSWERS.items()}
    return codes.get(status, 3)  # a status this module has no name for
