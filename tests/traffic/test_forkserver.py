"""The fork server starts the suite's own programs inside the sandbox, and stops them, as Popen would.

The kubelet forks every model server and sentinel from it (`Launch.entry`), so what a Popen promised
must hold for a fork too: the child runs inside the network sandbox and serves there, its output goes
to its log, its exit status and signals reach it by its process group, and nothing outlives the
client that asked for it or the server. These tests ask a real fork server inside a real sandbox.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conformance.traffic import netns
from conformance.traffic.forkserver import ForkServer
from conformance.traffic.netns import Sandbox

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

POD = "10.244.0.7"
BACKEND = "conformance.traffic.backend"
SENTINEL = "conformance.traffic.sentinel"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(stop_timeout=1) as sb:
        sb.add_address(POD)
        yield sb


@pytest.fixture
def forks(sandbox):
    with ForkServer(sandbox) as server:
        yield server


def log_line(log: Path, text: str, timeout: float = 5.0) -> str:
    """The first line of log that starts with text (waiting for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines() if log.exists() else []:
            if line.startswith(text):
                return line
        time.sleep(0.01)
    raise AssertionError(f"{log} has no line starting {text!r} after {timeout:g}s: {log.read_text()!r}")


def post(sandbox: Sandbox, port: int) -> str:
    """The body of a POST to the pod address's port, sent from inside the sandbox."""
    script = ("import http.client, sys; c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5);"
              "c.request('POST', '/', body='{}'); print(c.getresponse().read().decode())")
    return sandbox.run([sys.executable, "-I", "-S", "-c", script, POD, str(port)]).stdout


def test_a_forked_backend_runs_inside_the_sandbox_and_answers_at_its_pod_address(forks, sandbox, tmp_path):
    log = tmp_path / "backend.log"
    child = forks.spawn(BACKEND, ["--address", POD, "--port", "3000", "--pod", "p", "--namespace", "ns"],
                        env={"SERVICE_NAME": "svc"}, log=log)
    assert log_line(log, "listening") == f"listening {POD}:3000"
    assert sandbox.contains(child.pid) and child.poll() is None
    answer = json.loads(post(sandbox, 3000))
    assert (answer["pod"], answer["namespace"], answer["service"]) == ("p", "ns", "svc")
    child.terminate()
    assert child.wait(5) == 0


def test_the_exit_status_is_popens_and_a_child_leads_its_own_group(forks, tmp_path):
    log = tmp_path / "sentinel.log"
    child = forks.spawn(SENTINEL, ["--address", POD, "--port", "3100", "--exit-code", "7"], env={}, log=log)
    log_line(log, "listening")
    with open(f"/proc/{child.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    assert int(fields[2]) == child.pid and int(fields[3]) == child.pid  # pgrp and session: its own
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.1)
    child.send_signal(signal.SIGKILL)
    assert child.wait(5) == -signal.SIGKILL == child.poll()
    child.kill()  # after its exit: nothing to signal, nothing raised


def test_an_unknown_module_or_bad_arguments_are_refused_or_exit_nonzero(forks, tmp_path):
    with pytest.raises(OSError, match="cannot fork os"):
        forks.spawn("os", [], env={}, log=tmp_path / "os.log")
    child = forks.spawn(BACKEND, ["--no-such-flag"], env={}, log=tmp_path / "bad.log")
    assert child.wait(5) == 2
    assert "the following arguments are required: --address" in (tmp_path / "bad.log").read_text()


def test_an_exit_said_in_the_same_read_as_the_pid_is_kept(tmp_path):
    """The server may say a child's exit in the same read as its PID (a child that exits at once, as a
    readiness probe of a closed port does, while the client thread waits for the CPU): spawn still
    returns the child, and wait its exit status. A server that says both at once stands in for it."""
    path = str(tmp_path / "forks.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        conn.sendall(b'{"pid": 4242}\n{"exit": 5}\n')
        time.sleep(2)  # (the connection stays open: the exit was said)
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    client = ForkServer.__new__(ForkServer)  # only the client side: spawn needs the socket's path alone
    client.path = path
    try:
        child = client.spawn(SENTINEL, [], env={}, log=os.devnull)
        assert (child.pid, child.wait(1)) == (4242, 5)
    finally:
        listener.close()


def test_the_child_gets_the_environment_it_is_given_and_no_other(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("SERVICE_NAME", "from-the-suite")  # the server's own environment is not the child's
    log = tmp_path / "env.log"
    with ForkServer(sandbox) as forks:
        child = forks.spawn(BACKEND, ["--address", POD, "--port", "3001"],
                            env={"POD_NAME": "from-env", "NAMESPACE": "env-ns"}, log=log)
        log_line(log, "listening")
        answer = json.loads(post(sandbox, 3001))
        assert (answer["pod"], answer["namespace"], answer["service"]) == ("from-env", "env-ns", "")
        assert child.poll() is None  # (the handle lives as long as its child should: its close is a kill)


def test_a_client_that_goes_away_takes_its_child_along(forks, sandbox, tmp_path):
    log = tmp_path / "orphan.log"
    child = forks.spawn(BACKEND, ["--address", POD, "--port", "3002"], env={}, log=log)
    log_line(log, "listening")
    pid = child.pid
    child._sock.close()  # as when the suite's process dies
    assert _gone(pid, sandbox), f"child {pid} outlived its client"


def test_closing_the_server_stops_every_child_and_the_server(sandbox, tmp_path):
    server = ForkServer(sandbox)
    children = [server.spawn(BACKEND, ["--address", POD, "--port", str(3010 + i)], env={}, log=tmp_path / f"{i}.log")
                for i in range(3)]
    for i in range(3):
        log_line(tmp_path / f"{i}.log", "listening")
    server_pid = server.process.pid
    server.close()
    assert all(child.wait(5) == 0 for child in children)  # SIGTERM: each backend stops cleanly
    assert all(_gone(pid, sandbox, 0) for pid in [server_pid, *(c.pid for c in children)])
    assert not Path(server.path).exists()


def _gone(pid: int, sandbox: Sandbox, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pid not in sandbox.pids():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
