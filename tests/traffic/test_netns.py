"""The network sandbox keeps pod addresses off the machine's network, and the guard keeps them in it.

SPEC section 10 makes it a hard rule that pod and Service addresses (10.x) exist only inside a
network namespace the suite creates, with no route out, and that a test prove the guard. These tests
check the namespace as a process inside it sees it (lo alone, no route, pod addresses served), as
the machine sees it (the pod address is not here), the guard's refusal, and that nothing outlives
the sandbox.
"""

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.traffic import netns
from conformance.traffic.netns import NetworkSafetyError, Sandbox, start_process

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

POD, OTHER_POD = "10.244.0.5", "10.244.0.6"
DAEMON = (
    "import subprocess as s;"
    "print(s.Popen(['sleep', '60'], start_new_session=True, stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
)
PROBE = [sys.executable, "-I", "-S", str(Path(__file__).with_name("probe.py"))]


@pytest.fixture(scope="module")
def sandbox():
    """One sandbox for the tests that leave it as they found it (a namespace costs a few process starts)."""
    with Sandbox(stop_timeout=1) as sb:
        sb.add_address(POD, OTHER_POD)
        yield sb


def alive(pid: int) -> bool:
    """Whether pid is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def serve(sb: Sandbox, ip: str, port: int = 3000) -> subprocess.Popen:
    server = sb.popen([*PROBE, "serve", ip, str(port)], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    return server


def test_lo_carries_loopback_and_the_pod_addresses(sandbox):
    out = sandbox.run(["ip", "-o", "-4", "address", "show", "dev", "lo"]).stdout
    assert {line.split()[3] for line in out.splitlines()} == {"127.0.0.1/8", f"{POD}/32", f"{OTHER_POD}/32"}
    assert sandbox.addresses == [POD, OTHER_POD]
    with pytest.raises(ValueError, match="loopback"):
        sandbox.add_address("127.0.0.2")


def test_lo_is_the_only_interface(sandbox):
    links = sandbox.run(["ip", "-o", "link", "show"]).stdout.splitlines()
    assert [line.split(":")[1].strip() for line in links] == ["lo"]
    assert ",UP," in links[0]


def test_check_finds_a_route_out():
    with Sandbox() as sb:
        sb.check()
        sb.run(["ip", "route", "add", "default", "dev", "lo"])
        with pytest.raises(NetworkSafetyError, match="has a route out: default dev lo"):
            sb.check()


@pytest.mark.parametrize("target", ["10.244.0.1", "1.1.1.1", "2606:4700:4700::1111"])
def test_no_route_out(sandbox, target):
    assert sandbox.run(["ip", "route", "show", "default"]).stdout == ""
    assert sandbox.run(["ip", "-6", "route", "show", "default"]).stdout == ""
    # The probe waits up to 3 s: a failure at once, with ENETUNREACH, means nothing was sent anywhere.
    name, took = sandbox.run([*PROBE, "connect", target, "80"]).stdout.split()
    assert name == errno.errorcode[errno.ENETUNREACH] and float(took) < 0.5


def test_pod_address_is_served_inside_and_absent_outside(sandbox):
    server = serve(sandbox, POD)
    # Outside, the machine has no such address: nothing can even bind it ...
    with socket.socket() as s, pytest.raises(OSError) as bound:
        s.bind((POD, 0))
    assert bound.value.errno == errno.EADDRNOTAVAIL
    # ... and a connect that may only leave through the machine's lo (so sends nothing off the
    # machine) does not reach the server inside.
    with socket.socket() as s:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
        except PermissionError:
            pass  # not root: the bind check above has to do
        else:
            s.settimeout(0.2)
            with pytest.raises(OSError):
                s.connect((POD, 3000))
    # Inside, a client reaches it.
    assert sandbox.run([*PROBE, "connect", POD, "3000"]).stdout.strip() == f"served by {POD}"
    server.terminate()
    assert server.stdout.read().split("\n")[:-1] == [f"accepted {POD}"]  # the inside client alone
    server.wait()


def test_the_guard_refuses_a_pod_address_without_a_sandbox(tmp_path, monkeypatch):
    marker = tmp_path / "started"
    config = tmp_path / "backends.yaml"
    config.write_text("endpoints:\n- address: 10.244.0.7\n  port: 3000\n")
    started = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **kw: started.append(a) or real_popen(*a, **kw))
    argv = ["sh", "-c", f"touch {marker}"]
    handed = [
        {"argv": [*argv, "--upstream=10.244.0.7:3000"]},
        {"argv": argv, "env": {**os.environ, "EPP_ADDRESS": "10.96.0.10:9002"}},
        {"argv": argv, "files": [config]},
        {"argv": argv, "addresses": ["10.244.0.7"]},
        {"argv": [*argv, "[fd00:10:244::7]:3000"]},
        {"argv": [*argv, "--bind=0.0.0.0:3000"]},
    ]
    for kw in handed:
        with pytest.raises(NetworkSafetyError) as refused:
            start_process(**kw)
        message = str(refused.value)
        assert message.startswith("refusing to start sh: it is handed ") and "\n" not in message
    assert started == [] and not marker.exists()


def test_the_guard_lets_loopback_through_and_sandboxes_the_rest(sandbox):
    outside = start_process(["sh", "-c", "exit 0", "127.0.0.1:8080", "[::1]:8080", "v1.2.3.4.5"])
    assert outside.wait(5) == 0
    inside = start_process(
        ["sh", "-c", "echo up; exec sleep 60"], [POD], sandbox=sandbox, stdout=subprocess.PIPE, text=True
    )
    assert inside.stdout.readline() == "up\n"  # past nsenter: the pid is sleep's now
    assert sandbox.contains(inside.pid) and not sandbox.contains(os.getpid())


def test_addresses_in():
    text = "10.244.0.5:3000 [fd00::2]:80 10.96.0.0/16 std::string 12:30:45 v1.2.3.4.5 999.1.1.1 127.0.0.1"
    assert netns.addresses_in(text) == {"10.244.0.5", "fd00::2", "10.96.0.0", "127.0.0.1"}


def test_nothing_outlives_the_sandbox():
    with Sandbox(stop_timeout=0.3) as sb:
        plain = sb.popen(["sleep", "60"])
        stubborn = sb.popen(["sh", "-c", "trap '' TERM; sleep 60; :"])  # SIGTERM ignored: SIGKILL it is
        # A daemon: it left its parent and its session (and our pipes); only the namespace knows it.
        daemon = int(sb.run([sys.executable, "-c", DAEMON]).stdout)
        holder = sb.holder_pid
        inside = set(sb.pids())
        assert {plain.pid, stubborn.pid, daemon, holder} <= inside
        net = netns._ns_id(f"/proc/{holder}/ns/net")
    assert [pid for pid in inside if alive(pid)] == []
    assert plain.returncode is not None and stubborn.returncode is not None
    assert sb.holder_pid is None and sb.pids() == []
    # This process no longer pins the namespace either: with no process and no fd, it is gone.
    assert net not in {netns._ns_id(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}


def test_addresses_come_and_go_and_listeners_are_seen(sandbox):
    """remove_address takes a pod address off lo; listening() sees a server inside on its address."""
    sandbox.add_address("10.244.3.1", "10.244.3.2")
    sandbox.add_address("10.244.3.1")  # already there: nothing to do
    server = sandbox.popen([*PROBE, "serve", "10.244.3.1", "7070"],
                           stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    assert sandbox.listening(7070) and sandbox.listening(7070, "10.244.3.1")
    assert not sandbox.listening(7070, "10.244.3.2") and not sandbox.listening(7071)
    sandbox.remove_address("10.244.3.2", "10.244.9.9")
    assert "10.244.3.2" not in sandbox.addresses and "10.244.3.1" in sandbox.addresses
    shown = sandbox.run(["ip", "-o", "address", "show", "dev", "lo"]).stdout
    assert "10.244.3.1/32" in shown and "10.244.3.2/32" not in shown
