"""Carry one TCP port across the network sandbox's boundary, and nothing else.

Why: the traffic processes run inside the sandbox (a network namespace with nothing but `lo`), yet
some of them must talk to things outside it. The endpoint picker and the gateway implementation
watch the embedded cluster's API server, which listens on https://127.0.0.1:<port> on the machine;
inside the sandbox that address is the sandbox's own loopback, where nothing listens. The other
way round, a test client of the suite must reach the gateway's listener, which lives inside. A
second interface or a route out of the sandbox would break the sandbox's promise (no packet to a
pod address ever leaves it), so the two sides meet through the filesystem instead, which network
namespaces share: a unix socket in a private temporary directory.

How: a `Bridge` is two byte pumps joined by that unix socket. One end listens on a TCP address on
its side of the boundary and forwards each connection to the unix socket; the other end accepts on
the unix socket and connects to the TCP target on its side. The end inside the sandbox is a small
process of this very file (run with the standard library alone, started through the guard,
`netns.start_process`); the end outside is a thread of the suite's process. Bytes are copied as
they come: TLS passes through untouched, so the cluster's kubeconfig (its CA, its client
certificate, its `server:` address) works unchanged inside.

- `Bridge.into(sandbox, port)`: a loopback port of the machine, reachable inside at the same address.
  `ApiBridge(sandbox, server_url)` is that for the API server.
- `Bridge.out_of(sandbox, port, host=...)`: a port inside (on loopback or a pod address), reachable
  from a loopback port of the machine, or from its unix socket (`.socket`) directly.

The end outside only ever listens on or connects to loopback addresses, so a bridge can never be a
way out of the sandbox to the network. A bridge is a context manager; `close()` stops the thread,
the process inside (by PID) and removes the directory. The process inside also exits when the
suite's end of its stdin closes, so it does not outlive a suite that died.
"""

from __future__ import annotations

import ipaddress
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .netns import Sandbox

_BUFFER = 256 * 1024
_BACKLOG = 1024
_CONNECT_TIMEOUT = 10.0


class BridgeError(RuntimeError):
    """A bridge could not be set up (the message says which end and why)."""


# -- endpoints: "tcp:HOST:PORT" (IPv6 as "tcp:[::1]:PORT") or "unix:PATH" ----------------------------

def _parse(endpoint: str) -> tuple[str, object]:
    kind, _, rest = endpoint.partition(":")
    if kind == "unix" and rest:
        return "unix", rest
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        return "tcp", (host.strip("[]"), int(port))
    raise ValueError(f"not an endpoint (tcp:HOST:PORT or unix:PATH): {endpoint!r}")


def _tcp_endpoint(host: str, port: int) -> str:
    return f"tcp:[{host}]:{port}" if ":" in host else f"tcp:{host}:{port}"


def _listen(endpoint: str) -> socket.socket:
    kind, where = _parse(endpoint)
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(where)
            sock.listen(_BACKLOG)
        except OSError:
            sock.close()
            raise
    else:
        host, port = where
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=_BACKLOG)
    sock.setblocking(False)
    return sock


def _connector(endpoint: str) -> Callable[[], socket.socket]:
    kind, where = _parse(endpoint)

    def connect() -> socket.socket:
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(_CONNECT_TIMEOUT)
            try:
                sock.connect(where)
            except OSError:
                sock.close()
                raise
        else:
            sock = socket.create_connection(where, timeout=_CONNECT_TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        return sock

    return connect


# -- the byte pump (both ends run this) ---------------------------------------------------------------

class Forwarder:
    """Accept on a listening socket; for each connection, connect to the target and copy bytes both ways.

    Each connection gets two threads, one per direction. End-of-file in one direction is passed on as
    a half-close (`shutdown(SHUT_WR)`), so request/response protocols that close their sending side
    first still work; an error in either direction ends both. `stop()` wakes the accept loop and cuts
    every open connection.
    """

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]):
        self.listener = listener
        self._connect = connect
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._stopped = False
        self.accepted = 0  # connections accepted so far

    def serve_forever(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopped:
                for key, _ in sel.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        client, _ = self.listener.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    except OSError:  # out of descriptors, say: let the backlog wait a moment
                        time.sleep(0.05)
                        continue
                    self.accepted += 1
                    client.setblocking(True)
                    threading.Thread(target=self._handle, args=(client,), daemon=True,
                                     name="bridge-connection").start()

    def stop(self) -> None:
        self._stopped = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        with self._lock:
            conns = list(self._open)
        for sock in conns:
            _shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        self.stop()
        for sock in (self.listener, self._wake_r, self._wake_w):
            sock.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open) // 2

    def _handle(self, client: socket.socket) -> None:
        if client.family != socket.AF_UNIX:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            upstream = self._connect()
        except OSError:
            client.close()  # the target is not there: the client sees the connection end
            return
        with self._lock:
            if self._stopped:
                client.close()
                upstream.close()
                return
            self._open.update((client, upstream))
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True, name="bridge-pump")
        back.start()
        _pump(client, upstream)
        back.join()
        with self._lock:
            self._open.difference_update((client, upstream))
        client.close()
        upstream.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src's end-of-file (then half-close dst) or an error (then cut both)."""
    try:
        while data := src.recv(_BUFFER):
            dst.sendall(data)
    except OSError:
        _shutdown(src, socket.SHUT_RDWR)
        _shutdown(dst, socket.SHUT_RDWR)
    else:
        _shutdown(dst, socket.SHUT_WR)


def _shutdown(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass


# -- the bridge ---------------------------------------------------------------------------------------

def _loopback(host: str, what: str) -> str:
    host = "127.0.0.1" if host == "localhost" else host
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{what} must be a loopback IP address, not {host!r}: the end outside the sandbox "
                         "touches nothing but the machine's loopback")
    return host


class Bridge:
    """One TCP port carried across a sandbox's boundary, through a unix socket in a private directory.

    `listen="inside"`: a process inside the sandbox listens on `inside` (host, port) and every
    connection reaches `outside` (a loopback address of the machine). `listen="outside"`: the suite
    listens on `outside` (loopback; port 0 picks a free one) and every connection reaches `inside` (any
    address inside the sandbox). After `start()`, `inside` and `outside` hold the ports really used.
    """

    def __init__(self, sandbox: Sandbox, *, listen: str, inside: tuple[str, int], outside: tuple[str, int],
                 start_timeout: float = 10.0):
        if listen not in ("inside", "outside"):
            raise ValueError(f"listen must be 'inside' or 'outside', not {listen!r}")
        self.sandbox = sandbox
        self.listen = listen
        self.inside = (inside[0], int(inside[1]))
        self.outside = (_loopback(outside[0], "the outside address"), int(outside[1]))
        self.start_timeout = start_timeout
        self.dir: str | None = None
        self.process: subprocess.Popen | None = None  # the end inside the sandbox
        self._forwarder: Forwarder | None = None  # the end outside
        self._thread: threading.Thread | None = None

    @classmethod
    def into(cls, sandbox: Sandbox, port: int, host: str = "127.0.0.1", *, inside_port: int | None = None,
             **kw) -> Bridge:
        """A port of the machine's loopback, reachable inside the sandbox at the same address
        (or at `inside_port`)."""
        return cls(sandbox, listen="inside", inside=(host, port if inside_port is None else inside_port),
                   outside=(host, port), **kw)

    @classmethod
    def out_of(cls, sandbox: Sandbox, port: int, host: str = "127.0.0.1", *, outside_port: int = 0,
               outside_host: str = "127.0.0.1", **kw) -> Bridge:
        """A port inside the sandbox (host: loopback or a pod address there), reachable from a loopback
        port of the machine (`outside_port`; 0 picks a free one, see `.outside`)."""
        return cls(sandbox, listen="outside", inside=(host, port), outside=(outside_host, outside_port), **kw)

    def __enter__(self) -> Bridge:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def socket(self) -> str | None:
        """The unix socket between the two ends (None when stopped). For listen="outside" the end inside
        accepts on it: a client on the machine may connect to it directly and reach `inside` with one
        byte pump fewer, and no thread of the suite's process per connection."""
        return os.path.join(self.dir, "socket") if self.dir else None

    @property
    def outside_url(self) -> str:
        host, port = self.outside
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> Bridge:
        from ..cluster import scratch  # (not at the top: this file also runs alone)

        self.dir = str(scratch.mkdtemp("bridge"))  # mode 0700: the socket is the suite's alone
        unix = f"unix:{self.socket}"
        try:
            if self.listen == "inside":
                # The suite's end first: the process inside forwards to it from its first connection on.
                self._serve_outside(_listen(unix), _connector(_tcp_endpoint(*self.outside)))
                port = self._start_inside(_tcp_endpoint(*self.inside), unix)
                self.inside = (self.inside[0], port)
            else:
                self._start_inside(unix, _tcp_endpoint(*self.inside))
                listener = _listen(_tcp_endpoint(*self.outside))
                self.outside = (self.outside[0], listener.getsockname()[1])
                self._serve_outside(listener, _connector(unix))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop both ends (the process inside by its PID: SIGTERM, then SIGKILL) and remove the directory."""
        if self._forwarder is not None:
            self._forwarder.stop()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self.process is not None:
            _stop(self.process)
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    @property
    def pid(self) -> int | None:
        """The PID of the end inside the sandbox (None when stopped)."""
        return self.process.pid if self.process else None

    @property
    def accepted(self) -> int:
        """Connections the end outside has accepted (listen="inside": from the sandbox) so far."""
        return self._forwarder.accepted if self._forwarder else 0

    @property
    def open_connections(self) -> int:
        """Connections the end outside is carrying now."""
        return self._forwarder.open_connections if self._forwarder else 0

    def _serve_outside(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self._forwarder = Forwarder(listener, connect)
        self._thread = threading.Thread(target=self._forwarder.serve_forever, daemon=True, name="bridge-outside")
        self._thread.start()

    def _start_inside(self, listen: str, target: str) -> int:
        """Start this file inside the sandbox as the end there; return the port it listens on (0 for unix)."""
        from .netns import start_process  # (not at the top: this file also runs alone, as the end inside)

        assert self.dir is not None
        log = os.path.join(self.dir, "inside.log")
        with open(log, "wb") as err:
            self.process = start_process(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), listen, target], sandbox=self.sandbox,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            )
        line = _readline(self.process.stdout, self.start_timeout)
        if not line.startswith("ready"):
            _stop(self.process)
            with open(log, errors="replace") as f:
                detail = f.read().strip().splitlines()[-1:] or ["it exited" if not line else line]
            raise BridgeError(f"the bridge's end inside the sandbox did not start ({listen} -> {target}): "
                              f"{detail[0]}")
        return int(line.split()[1])


def _readline(stream, timeout: float) -> str:
    """One line from a pipe, or '' at end-of-file or after timeout seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return stream.readline().decode(errors="replace").strip()


def _stop(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


class ApiBridge(Bridge):
    """The API server at `server_url` (https://127.0.0.1:<port>), reachable inside the sandbox at the same
    URL, so that a kubeconfig naming it works unchanged for processes started there."""

    def __init__(self, sandbox: Sandbox, server_url: str, **kw):
        url = urllib.parse.urlsplit(server_url)
        if url.hostname is None:
            raise ValueError(f"not a server URL: {server_url!r}")
        port = url.port or (443 if url.scheme == "https" else 80)
        host = _loopback(url.hostname, f"the API server's host in {server_url}")
        super().__init__(sandbox, listen="inside", inside=(host, port), outside=(host, port), **kw)
        self.url = server_url


# -- the end inside the sandbox: `python -I -S bridge.py LISTEN TARGET` --------------------------------

def _main(listen: str, target: str) -> None:
    forwarder = Forwarder(_listen(listen), _connector(target))

    def lifeline() -> None:  # the suite holds the other end of stdin: its end-of-file means the suite is gone
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=lifeline, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    name = forwarder.listener.getsockname()
    print("ready", name[1] if isinstance(name, tuple) else 0, flush=True)
    forwarder.serve_forever()


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
