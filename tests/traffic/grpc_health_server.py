"""A gRPC health service for the kubelet's tests: `grpc_health_server.py IP PORT SERVICE FLAG`.

It answers grpc.health.v1.Health/Check over h2c, one connection at a time: SERVING while the file FLAG
exists, NOT_SERVING while it does not, and SERVICE_UNKNOWN when asked for a service other than
SERVICE. Like upstream's endpoint picker, whose health port listens from its start but answers
SERVING only once it has read its pool, its port listens long before it is ready. The standard
library alone, so it runs under `python -I -S`.
"""

import os
import socket
import struct
import sys

SERVING, NOT_SERVING, SERVICE_UNKNOWN = 1, 2, 3


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def answer(conn: socket.socket, service: str, flag: str) -> None:
    reader = conn.makefile("rb")
    if reader.read(24) != b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n":
        return
    body = b""
    while True:  # the client's frames, up to the end of its request's stream
        head = reader.read(9)
        if len(head) < 9:
            return
        payload = reader.read(int.from_bytes(head[:3], "big"))
        if head[3] == 0x0:  # DATA
            body += payload
        if head[3] in (0x0, 0x1) and head[4] & 0x1:  # DATA or HEADERS with END_STREAM
            break
    message = body[5:]  # after the gRPC length prefix: HealthCheckRequest, field 1 (service)
    asked = message[2:2 + message[1]].decode() if message[:1] == b"\x0a" else ""
    status = SERVICE_UNKNOWN if asked != service else SERVING if os.path.exists(flag) else NOT_SERVING
    response = bytes((0x08, status))  # HealthCheckResponse, field 1 (status)
    conn.sendall(frame(0x4, 0, 0)  # SETTINGS
                 + frame(0x1, 0x4, 1, b"\x88")  # HEADERS, END_HEADERS: ":status: 200" (HPACK static index 8)
                 + frame(0x0, 0x1, 1, b"\x00" + struct.pack(">I", len(response)) + response))  # DATA, END_STREAM


def main(ip: str, port: str, service: str, flag: str) -> None:
    with socket.create_server((ip, int(port))) as server:
        while True:
            conn, _ = server.accept()
            with conn:
                try:
                    answer(conn, service, flag)
                except OSError:
                    pass


if __name__ == "__main__":
    main(*sys.argv[1:5])
