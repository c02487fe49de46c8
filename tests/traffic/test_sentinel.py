"""The sentinel shows a connection where the Kubernetes API can see it: it exits on the first one.

Rule T5 counts connections to an ExternalName Service's target by a container that exits on its first
accepted connection (busybox's `nc -l -p PORT -e false` on a real cluster, `conformance.traffic.sentinel`
on the embedded one). These tests check the program (it listens on every port given and stays up
until a connection comes; the first connection on any port ends it at once with code 1, even while
the client holds the connection open; SIGTERM ends it with 0; a taken port is one line), the reading
of the busybox command the kubelet stand-in runs it for, and how a test reads a Pod's status for
connections (`tier.container_connections`). tests/traffic/test_kubelet.py runs it as a Pod.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest

from conformance.options import DEFAULT_SENTINEL_IMAGE
from conformance.traffic.kubelet import Container, Unsupported, parse_netcat, sentinel
from conformance.traffic.tier import container_connections

SENTINEL = [sys.executable, "-S", "-m", "conformance.traffic.sentinel", "--address", "127.0.0.1"]


def start(*ports: int, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, list[int]]:
    """The sentinel on loopback, once it says it listens: (process, the ports it listens on)."""
    argv = [*SENTINEL, *(a for p in ports for a in ("--port", str(p))), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    assert line[0] == "listening", (line, proc.stderr.read())
    return proc, [int(e.rsplit(":", 1)[1]) for e in line[1:]]


def test_it_listens_until_the_first_connection_and_then_exits_with_1_at_once():
    proc, ports = start(0, 0)
    try:
        assert len(ports) == 2
        for port in ports:  # both listen (a connect would end it: look at the kernel's table instead)
            assert any(f":{port:04X} " in line and line.split()[3] == "0A"
                       for line in open(f"/proc/{proc.pid}/net/tcp").read().splitlines()[1:])
        assert proc.poll() is None
        with socket.create_connection(("127.0.0.1", ports[1]), timeout=5) as held:  # held open: no matter
            assert proc.wait(5) == 1
            assert held.recv(10) == b""  # closed by the sentinel, nothing sent
        out = proc.stdout.read()
        assert out.startswith("connection from 127.0.0.1:") and out.strip().endswith(f"to 127.0.0.1:{ports[1]}")
        with pytest.raises(ConnectionRefusedError):  # nothing listens any more, on either port
            socket.create_connection(("127.0.0.1", ports[0]), timeout=5)
    finally:
        proc.kill()
        proc.wait()


def test_exit_code_sigterm_and_a_taken_port():
    proc, [port] = start(0, extra=("--exit-code", "0"))
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert proc.wait(5) == 0
    proc, [port] = start(0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(5) == 0 and proc.stdout.read() == ""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        run = subprocess.run([*SENTINEL, "--port", str(taken.getsockname()[1])], capture_output=True, text=True,
                             timeout=10)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("cannot listen on 127.0.0.1:") and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, expected", [
    (["nc", "-l", "-p", "9002", "-e", "false"], (9002, 1)),
    (["busybox", "nc", "-lv", "-p9002", "-e", "/bin/false"], (9002, 1)),
    (["/bin/nc", "-n", "-l", "-p", "80", "-e", "true"], (80, 0)),
    (["nc", "-l", "-p", "9002"], (9002, 0)),  # busybox relays until the peer closes, then exits 0
])
def test_the_busybox_command_it_stands_in_for(argv, expected):
    assert parse_netcat(argv) == expected


@pytest.mark.parametrize("argv, says", [
    (["sh", "-c", "nc -l -p 9002"], "is not `nc -l -p PORT [-e PROG]`"),
    (["nc", "-p", "9002", "-e", "false"], "does not listen on a port"),
    (["nc", "-l", "-e", "false"], "does not listen on a port"),
    (["nc", "-l", "-p", "0x10"], "is not a port"),
    (["nc", "-l", "-p", "9002", "-e", "sh", "-c", "exit 3"], "only `-e false` or `-e true`"),
    (["nc", "-lk", "-p", "9002", "-e", "false"], "'-lk' is not understood"),
])
def test_what_it_does_not_stand_in_for(argv, says):
    with pytest.raises(ValueError, match=".*" + says.replace("[", r"\[").replace("]", r"\]")):
        parse_netcat(argv)


def test_the_kubelet_program_listens_at_the_pod_address_only():
    pod = {"metadata": {"name": "sentinel", "namespace": "ns"}}
    spec = {"name": "picker", "image": DEFAULT_SENTINEL_IMAGE, "command": ["nc", "-l"], "args": ["-p", "9002", "-e",
                                                                                                 "false"]}
    launch = sentinel(Container(pod, spec, "10.244.0.9", "10.244.0.1", {}))
    assert launch.argv[1:] == ["-S", "-m", "conformance.traffic.sentinel", "--address", "10.244.0.9", "--port", "9002",
                               "--exit-code", "1"]
    assert list(launch.ports) == [9002]
    with pytest.raises(Unsupported, match="container picker: 'sleep 3600' is not"):
        sentinel(Container(pod, {**spec, "command": ["sleep", "3600"], "args": []}, "10.244.0.9", "10.244.0.1", {}))


def status(*containers: dict) -> dict:
    return {"status": {"containerStatuses": list(containers)}}


RUNNING = {"name": "picker", "restartCount": 0, "ready": True, "state": {"running": {"startedAt": "T0"}}}


@pytest.mark.parametrize("container, seen", [
    (RUNNING, []),
    ({**RUNNING, "ready": False}, []),  # readiness is the probe's word; only a stop counts
    ({**RUNNING, "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "T1"}}},
     ["container picker exited with code 1 (Error) at T1"]),
    ({**RUNNING, "restartCount": 2, "state": {"running": {"startedAt": "T2"}},
      "lastState": {"terminated": {"exitCode": 1, "finishedAt": "T1"}}},
     ["container picker was restarted 2 time(s), last exit code 1 at T1"]),
    ({**RUNNING, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
     ["container picker is not running (CrashLoopBackOff)"]),
    ({**RUNNING, "state": {"running": {"startedAt": "T5"}}}, ["container picker runs since T5, not since T0"]),
    ({**RUNNING, "name": "other"}, ["container picker has no status (the Pod is gone?)"]),
])
def test_a_pod_status_read_for_connections(container, seen):
    assert container_connections(status(container), {"picker": "T0"}) == seen
    assert container_connections(None, {"picker": "T0"}) == ["container picker has no status (the Pod is gone?)"]
