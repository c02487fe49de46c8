"""A tiny TCP server and client that the tests start inside a network sandbox.

Only a whole process can be put in a network namespace, so what the tests want to do in there (serve
on a pod address, connect to one) is this script, run with `serve IP PORT` or `connect IP PORT`.
It uses the standard library alone, so it runs under `python -I -S`.
"""

import errno
import socket
import sys
import time


def serve(ip: str, port: int) -> None:
    """Listen on ip:port; say "listening", then "accepted <peer>" per connection, which gets "served by <ip>"."""
    with socket.create_server((ip, port)) as server:
        print("listening", flush=True)
        while True:
            conn, peer = server.accept()
            print("accepted", peer[0], flush=True)
            with conn:
                conn.sendall(f"served by {ip}".encode())


def connect(ip: str, port: int, timeout: float = 3.0) -> None:
    """Connect to ip:port and print what it sent, or the errno's name and how long the failure took."""
    start = time.monotonic()
    try:
        with socket.create_connection((ip, port), timeout=timeout) as conn:
            print(conn.recv(100).decode())
    except OSError as e:
        print(errno.errorcode.get(e.errno, type(e).__name__), f"{time.monotonic() - start:.3f}")


if __name__ == "__main__":
    {"serve": serve, "connect": connect}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
