"""A slow endpoint picker: a program run behind a delay line that holds back every byte it answers.

Why: a picker may take its time, and a gateway that waits for it within its own timeouts is conformant,
so the traffic tier must not fail it (issue: "benign: a slow EPP within the timeouts"). Upstream's EPP
has no knob for that, and a test must not change what it judges, so the embedded data plane can put
this in front of each EPP instead (`DataPlane(epp_delay=...)`, or IPC_EPP_DELAY in the environment of
a run, as tests/test_traffic_faults.py does): every answer of the picker reaches the gateway that many
seconds late, whatever the protocol (TLS and HTTP/2 pass through untouched), and what the gateway sends
reaches the picker at once.

It runs as the EPP container's process, so that it lives and dies with the Pod: a picker whose Pod is
deleted stops accepting connections, as it would without the delay line (FailOpen and FailClose are
judged by what the gateway does then). The program it wraps is its child, told to listen on another
port of the sandbox's loopback; the delay line listens on the port the Pod declares, on every address,
and exits with the program's exit code; SIGTERM goes on to the program.

    python -I -S delay.py --port 20000 --target 50000 --seconds 0.3 -- epp --grpc-port=50000 ...

Standard library only (it runs with -I -S, like bridge.py).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import signal
import socket
import subprocess
import sys
import threading
import time

_BUFFER = 256 * 1024
TARGET_OFFSET = 30000  # the wrapped program's port: the declared one plus this (inside the sandbox only)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _send_at_once(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(_BUFFER):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        _close(src)
        _close(dst)


def _send_late(src: socket.socket, dst: socket.socket, seconds: float) -> None:
    """Copy src to dst, each chunk `seconds` after it came (a delay line: no limit on what is in flight)."""
    line: collections.deque = collections.deque()
    ready = threading.Condition()

    def write() -> None:
        try:
            while True:
                with ready:
                    while not line:
                        ready.wait()
                    due, data = line.popleft()
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                if data is None:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
        except OSError:
            _close(src)
            _close(dst)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        while True:
            try:
                data = src.recv(_BUFFER)
            except OSError:
                data = b""
            with ready:
                line.append((time.monotonic() + seconds, data or None))
                ready.notify()
            if not data:
                break
    finally:
        writer.join()
        _close(src)
        _close(dst)


def _serve(listener: socket.socket, target: int, seconds: float) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
        except OSError:  # the program does not listen (yet, or any more): as if nothing listened here
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            _close(client)
            continue
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_send_at_once, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_send_late, args=(upstream, client, seconds), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="where the delay line listens (every address)")
    p.add_argument("--target", type=int, required=True, help="the wrapped program's port on loopback")
    p.add_argument("--seconds", type=float, required=True, help="how late each answer is passed on")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the program and its arguments")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.seconds < 0:
        p.error("needs -- PROGRAM [ARGS...] and --seconds 0 or more")
    listener = socket.create_server(("", args.port), family=socket.AF_INET, backlog=1024)
    program = subprocess.Popen(command, preexec_fn=lambda: ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL))
    signal.signal(signal.SIGTERM, lambda *_: program.send_signal(signal.SIGTERM))
    threading.Thread(target=_serve, args=(listener, args.target, args.seconds), daemon=True).start()
    code = program.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
