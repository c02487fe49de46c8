"""Start the suite's own container programs by forking a warm interpreter inside the sandbox.

Why: a traffic run starts about eighty model-server and sentinel processes, each a Python program of
this package. Started with `python -m ...`, each spends about 0.12 s of CPU on the interpreter and
its imports before it serves a byte: some ten seconds of a run on a two-core machine, where the run
is CPU-bound. A fork of an interpreter that has those modules imported already costs a few
milliseconds.

How: `ForkServer(sandbox)` starts this file as a process inside the network sandbox (through the
tier's one door, `netns.start_process`), and checks that it is inside before it is used. The server
imports the modules it may run (`PROGRAMS`) and answers on a unix socket in a private directory.
`ForkServer.spawn(module, args, ...)` connects, asks, and gets a `Forked` process: the server forks,
and the child makes a session of its own, takes the log file as stdout and stderr, the environment
it is given, and runs `module.main(args)`. A fork of a process inside the sandbox is inside the
sandbox: nothing it runs ever sees the machine's network.

Each child has one connection of its own to the server, which says when it exits (with its exit
status, as Popen's returncode) and takes its signals: the server signals a child's process group
only while the child is unreaped, so a signal never reaches a PID that was reused. A connection that
closes while its child runs kills that child; the server's stdin at EOF (its starter gone) or a
SIGTERM stops every child and then the server.

The server loop is one thread (a fork of a threaded process is unsafe), with the standard library
alone, like the programs it runs.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

# The modules the server imports ahead and may run (each has `main(argv) -> int`).
PROGRAMS = ("conformance.traffic.backend", "conformance.traffic.sentinel", "conformance.traffic.probe")
_STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL for the children when the server stops


# -- the client, in the suite's process ------------------------------------------------------------


class Forked:
    """A child of the fork server, used like a subprocess.Popen: pid, returncode, poll, wait, signals.

    The handle holds the child's connection: dropping it while the child runs kills the child."""

    def __init__(self, sock: socket.socket, pid: int, args: list[str], said: bytes = b""):
        self.pid, self.args, self.returncode = pid, args, None
        self._sock, self._buffer, self._lock = sock, said, threading.Lock()  # said: what the server said already

    def poll(self) -> int | None:
        with self._lock:
            self._read(0.0)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:  # (waiting outside the lock: poll from other threads goes on)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            try:
                select.select([self._sock], [], [], 0.05 if left is None else min(left, 0.05))
            except (OSError, ValueError):  # closed by another thread's poll: the exit is known
                pass
        return code

    def send_signal(self, sig: int) -> None:
        """Signal the child's process group (it leads its own session), unless it has exited."""
        with self._lock:
            if self.returncode is None:
                try:
                    self._sock.sendall(json.dumps({"signal": int(sig)}).encode() + b"\n")
                except OSError:
                    pass  # the server is gone, and with it the child (`_read` will say so)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, timeout: float | None) -> None:
        """Take what the server said (waiting up to timeout for it); set returncode on the child's exit."""
        if self.returncode is not None:
            return
        if b"\n" not in self._buffer:
            self._sock.settimeout(timeout)
            try:
                data = self._sock.recv(4096)
            except (BlockingIOError, TimeoutError):
                return
            except OSError:
                data = b""
            if not data:  # the server went away without a word: its children went with it
                self.returncode = -signal.SIGKILL
            self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self.returncode = message["exit"]
        if self.returncode is not None:
            self._sock.close()


class ForkServer:
    """The fork server of one sandbox; a context manager (closing it stops it and every child)."""

    def __init__(self, sandbox, timeout: float = 10.0):
        from ..cluster import scratch  # (not at the top: this file also runs alone)
        from .netns import NetworkSafetyError, start_process

        self._dir = str(scratch.mkdtemp("forks"))
        self.path = os.path.join(self._dir, "socket")
        pythonpath = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
        self.process = start_process([sys.executable, "-S", os.path.abspath(__file__), self.path],
                                     sandbox=sandbox, env={**os.environ, "PYTHONPATH": pythonpath},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout) and self.process.stdout.readline().strip() == b"ready"
        selector.close()
        if not ready:
            self.close()
            raise RuntimeError(f"the fork server did not start within {timeout:.0f}s")
        if not sandbox.contains(self.process.pid):  # it cannot be elsewhere; never trust that
            self.close()
            raise NetworkSafetyError("the fork server is not inside the network sandbox")

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def spawn(self, module: str, args: list[str], *, env: dict[str, str], log: str | os.PathLike,
              cwd: str | None = None) -> Forked:
        """Run `module.main(args)` in a fork: a new session, `log` as stdout and stderr, exactly `env`."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(10)
            sock.connect(self.path)
            request = {"module": module, "args": list(args), "env": dict(env), "log": os.fspath(log), "cwd": cwd}
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = b""
            while b"\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    raise OSError("the fork server closed the connection")
                reply += chunk
        except BaseException:
            sock.close()
            raise
        # A child that exits at once may have its exit said in the same read: it stays for the handle.
        line, rest = reply.split(b"\n", 1)
        answer = json.loads(line)
        if "error" in answer:
            sock.close()
            raise OSError(answer["error"])
        return Forked(sock, answer["pid"], [module, *args], rest)

    def close(self) -> None:
        """Stop the server (it stops its children first) and remove its directory."""
        proc, self.process = getattr(self, "process", None), None
        if proc is not None:
            proc.stdin.close()  # EOF: the server stops its children and exits
            try:
                proc.wait(_STOP_GRACE + 5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # unreaped: the PID is still this child's
                proc.wait()
            proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- the server, inside the sandbox ----------------------------------------------------------------------


def serve(path: str) -> int:
    for module in PROGRAMS:
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stopping = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears it
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    children: dict[int, socket.socket] = {}  # pid -> its connection
    buffers: dict[socket.socket, bytes] = {}
    owner: dict[socket.socket, int] = {}

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                except OSError:
                    pass
                forget(conn)

    def forget(conn: socket.socket) -> None:
        selector.unregister(conn)
        buffers.pop(conn, None)
        owner.pop(conn, None)
        conn.close()

    def signal_group(pid: int, sig: int) -> None:
        if pid in children:  # unreaped: the PID and its group are still this child's
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass

    print("ready", flush=True)
    while not stopping:
        try:
            events = selector.select()
        except InterruptedError:
            continue
        for key, _ in events:
            if key.data == "accept":
                conn, _ = listener.accept()
                buffers[conn] = b""
                selector.register(conn, selectors.EVENT_READ, "conn")
            elif key.data == "wake":
                os.read(wake_r, 4096)
                reap()
            elif key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    stopping.append(True)
            else:
                conn = key.fileobj
                data = conn.recv(4096)
                if not data:  # the client is gone: so goes its child
                    if conn in owner:
                        signal_group(owner[conn], signal.SIGKILL)
                        children[owner[conn]] = None  # reaped later, told nobody
                    forget(conn)
                    continue
                buffers[conn] += data
                while b"\n" in buffers.get(conn, b""):
                    line, buffers[conn] = buffers[conn].split(b"\n", 1)
                    message = json.loads(line)
                    if "signal" in message and conn in owner:
                        signal_group(owner[conn], message["signal"])
                    elif "module" in message and conn not in owner:
                        pid = start(message, [selector, listener, *buffers], wake_r, wake_w)
                        if pid is None:
                            conn.sendall(json.dumps({"error": f"cannot fork {message['module']}"}).encode() + b"\n")
                        else:
                            children[pid], owner[conn] = conn, pid
                            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    for pid in list(children):
        signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE
    while children and time.monotonic() < deadline:
        reap()
        time.sleep(0.01)
    for pid in list(children):
        signal_group(pid, signal.SIGKILL)
    while children:
        pid, _ = os.waitpid(-1, 0)
        children.pop(pid, None)
    return 0


def start(request: dict, close: list, wake_r: int, wake_w: int) -> int | None:
    """Fork a child that runs request's module; its PID (None when the module is not one of PROGRAMS)."""
    if request["module"] not in PROGRAMS:
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        for sock in close:
            sock.close()
        os.close(wake_r)
        os.close(wake_w)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        sys.argv = [request["module"], *request["args"]]
        code = sys.modules[request["module"]].main(request["args"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 (the child says why in its log, and exits)
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
