"""A slow picker: the delay line passes answers on late and requests at once, and lives with its program.

The benign run `slow-picker` of the traffic meta-test (every EPP behind conformance/traffic/delay.py)
proves that a conformant gateway passes with a slow picker; these tests prove that the delay line is
one: an answer comes the given time late and not much later, nothing is held back on the way in, the
program's end is the delay line's end (so a deleted picker Pod stops accepting connections), and
SIGTERM reaches the program.
"""

import signal
import sys
from pathlib import Path

import pytest

from conformance.traffic import delay, netns
from conformance.traffic.embedded import epp_program
from conformance.traffic.kubelet import Container
from conformance.traffic.netns import Sandbox

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))

PORT, TARGET = 20000, 20000 + delay.TARGET_OFFSET
PROBE = [sys.executable, "-I", "-S", str(Path(__file__).with_name("probe.py"))]
LINE = [sys.executable, "-I", "-S", delay.__file__, "--port", str(PORT), "--target", str(TARGET)]

# Inside the sandbox: connect to the delay line until it accepts, send a line, and print the seconds from
# the send to the first byte of the answer, then the answer.
CLIENT = """
import socket, sys, time
deadline = time.monotonic() + 10
while True:
    try:
        conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
        sent = time.monotonic()
        conn.sendall(b"hello")
        data = conn.recv(100)
        if data:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("no answer")
    time.sleep(0.05)
print(f"{time.monotonic() - sent:.3f}", data.decode())
"""


@pytest.fixture
def sandbox():
    with Sandbox(stop_timeout=1) as sb:
        yield sb


def test_answers_come_late(sandbox):
    line = sandbox.popen([*LINE, "--seconds", "0.5", "--", *PROBE, "serve", "127.0.0.1", str(TARGET)])
    try:
        seconds, answer = sandbox.run([sys.executable, "-I", "-S", "-c", CLIENT, str(PORT)]).stdout.split(" ", 1)
        assert answer.strip() == "served by 127.0.0.1"  # the program's answer, passed on whole
        assert 0.5 <= float(seconds) < 2.5
        line.send_signal(signal.SIGTERM)  # reaches the program, whose end is the delay line's
        assert line.wait(10) == 128 + signal.SIGTERM
    finally:
        line.kill()
        line.wait()


def test_the_program_ending_ends_the_delay_line(sandbox):
    line = sandbox.popen([*LINE, "--seconds", "0.1", "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert line.wait(10) == 3
    refused = sandbox.run([*PROBE, "connect", "127.0.0.1", str(PORT)]).stdout
    assert refused.startswith("ECONNREFUSED"), refused


def test_a_slow_epp_runs_behind_the_delay_line():
    pod = {"metadata": {"name": "endpoint-picker", "namespace": "ns"}}
    args = ["--pool-name=pool", f"--grpc-port={PORT}", "--grpc-health-port=20001"]
    spec = {"name": "epp", "image": "epp", "args": args}
    container = Container(pod, spec, "10.244.0.9", "10.245.255.1", {}, {})
    run = epp_program("/bin/epp", "kubeconfig", delay=0.25)(container)
    wrapper, program = run.argv[:run.argv.index("--")], run.argv[run.argv.index("--") + 1:]
    assert wrapper == [*LINE, "--seconds", "0.25"]
    assert program[0] == "/bin/epp" and f"--grpc-port={TARGET}" in program and f"--grpc-port={PORT}" not in program
    assert list(run.ports) == [PORT, 20001]  # the Pod is up once the delay line and the EPP's health listen
    plain = epp_program("/bin/epp", "kubeconfig")(container)
    assert plain.argv[0] == "/bin/epp" and f"--grpc-port={PORT}" in plain.argv
