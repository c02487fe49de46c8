"""A listener that shows every connection in the Kubernetes API: it exits on the first one it accepts.

Why: rule T5 (= X3) says that no connection ever reaches the target of an ExternalName Service named
as a pool's endpoint picker. A count of connections is only worth something if the same test can read
it on any cluster, the user's included, where the suite reaches neither pod addresses nor a Pod's
files. So the count is kept where the Kubernetes API shows it: the listener runs as a container that
exits on its first accepted connection, and a container that exited shows in the Pod's status
(`state.terminated`, `restartCount`, NotReady) for as long as the Pod lives.

On a real cluster the container is Busybox's netcat (`--sentinel-image`, by default the Kubernetes
end-to-end tests' busybox image) run as `nc -l -p PORT -e false`: it listens on PORT, accepts one
connection, then executes `false` in its own process (no fork without `-lk`), so the container ends
at once with exit code 1, without waiting for the peer to close. (Without `-e`, Busybox's nc would
relay the connection until the peer closes it, and a client that holds it open would keep the
container running.)

On the embedded cluster this module stands in for that container (the kubelet stand-in's program for
the sentinel image, `conformance.traffic.kubelet.sentinel`): run as

    python -m conformance.traffic.sentinel --address 10.244.0.9 --port 9002 [--port P2 ...] [--exit-code 1]

it listens on each port of the address, prints `listening IP:P ...`, and on the first connection
accepted on any of them prints `connection from PEER to IP:P`, closes it and exits with the exit code
(1, as `-e false`). SIGTERM or SIGINT end it with 0. Standard library only, so it starts under
`python -S` in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import selectors
import signal
import socket
import sys

CONNECTED_EXIT_CODE = 1  # what `nc -l -p PORT -e false` ends with once a connection came


def _endpoint(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def listen(address: str, ports: list[int]) -> list[socket.socket]:
    """A listening socket on address:port for each port (0: a free one)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    out = []
    try:
        for port in [p for i, p in enumerate(ports) if p == 0 or p not in ports[:i]]:
            s = socket.socket(family, socket.SOCK_STREAM)
            out.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, port))
            s.listen(16)
    except OSError:
        for s in out:
            s.close()
        raise
    return out


def serve(sockets: list[socket.socket], exit_code: int = CONNECTED_EXIT_CODE) -> int:
    """Wait for the first connection on any of the sockets; say who came, close it, return `exit_code`."""
    with selectors.DefaultSelector() as selector:
        for s in sockets:
            selector.register(s, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                try:
                    conn, peer = key.fileobj.accept()
                except BlockingIOError:
                    continue
                here = key.fileobj.getsockname()
                conn.close()
                print(f"connection from {_endpoint(peer[0], peer[1])} to {_endpoint(here[0], here[1])}", flush=True)
                return exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.traffic.sentinel", description=__doc__.split("\n")[0])
    parser.add_argument("--address", required=True, help="the pod address to listen on (never 0.0.0.0)")
    parser.add_argument("--port", type=int, action="append", required=True, help="a port to listen on (repeat)")
    parser.add_argument("--exit-code", type=int, default=CONNECTED_EXIT_CODE,
                        help=f"the exit code once a connection came (default {CONNECTED_EXIT_CODE}, as `nc -e false`)")
    args = parser.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    try:
        sockets = listen(args.address, args.port)
    except OSError as e:
        print(f"cannot listen on {args.address}: {e}", file=sys.stderr, flush=True)
        return 2
    print("listening", *(_endpoint(*s.getsockname()[:2]) for s in sockets), flush=True)
    return serve(sockets, args.exit_code)


if __name__ == "__main__":
    sys.exit(main())
