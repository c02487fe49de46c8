"""A kubelet stand-in for the embedded cluster: it runs Pods as local processes inside the network Sandbox.

Why: the embedded cluster has an API server and the EndpointSlice controller but no kubelet and no
scheduler, so its Pods stay Pending, without an IP, and nothing serves them. The traffic tier needs
the opposite: model-server Pods that are Running and Ready at a pod address, answering requests, so
that the EndpointSlice controller publishes them, an endpoint picker (EPP) finds them, and a gateway
can route to them. SPEC section 10 records what that takes: a Node that exists (the EndpointSlice
controller takes a Pod only when its nodeName names one), pod IPs that are not loopback (EndpointSlice
validation rejects those), and, a hard rule, those pod IPs exist only inside the suite's own network
namespace. So this kubelet runs in the suite's process (threads, the `kubernetes` client) but starts
every container inside a `netns.Sandbox`, through `netns.start_process` (or, for the suite's own
programs, forked from a `forkserver.ForkServer` started there that way), on an address it adds there.

What it does:

- registers a Node it owns (Ready, with an InternalIP and a podCIDR) and deletes it on close;
- watches Pods (in the namespaces it is told, or in all namespaces, optionally by label selector);
  binds unbound ones to its Node through `pods/binding` (a minimal scheduler: it honours nodeName
  and a nodeSelector on the Node's labels, nothing else), and runs the ones bound to its Node;
- gives each Pod a unique address from its podCIDR (10.244.0.0/16 unless told), never loopback,
  and puts it on the sandbox's lo;
- starts each container from a program table: image -> how to run it here (`Program`). The model
  server images (Gateway API's echo server, the suite's --model-server-image default) run
  `conformance.traffic.backend`, and the sentinel image (busybox, --sentinel-image's default) runs
  `conformance.traffic.sentinel` for `nc -l -p PORT -e false`; other components register theirs
  (`Kubelet.register`), e.g. the EPP image -> a built binary. A Pod with an image nobody registered
  stays Pending, its container waiting with reason `NoProgramForImage` and a message naming the
  image, and is tried again every second (so is a Pod whose ConfigMap is not there yet);
- waits until each container listens (its program's ports, and the ports of its readiness probe,
  read from the sandbox's /proc/<pid>/net/tcp{,6}: no process has to be started to probe) and, when
  its readiness probe is `grpc`, until the health service there answers SERVING (asked from inside
  the sandbox by `conformance.traffic.probe`, forked by the fork server), then writes `pods/status`:
  Running, podIP(s), hostIP(s), startTime, containerStatuses, and the conditions PodScheduled,
  Initialized, ContainersReady and Ready;
- honours readiness gates as a kubelet does: Ready is True only when the containers are ready
  (ContainersReady) and the condition of every `spec.readinessGates` entry, which others write into
  `status.conditions`, is True; a change of such a condition is written into Ready at once. Its
  status writes are strategic merge patches, so the conditions it does not own are kept;
- keeps watching: a container that exits is restarted per restartPolicy (with backoff) and shows
  NotReady meanwhile; `set_ready(namespace, name, False)` forces a Pod NotReady (for rules about
  NotReady pods) and `set_ready(..., True)` lets the probes decide again;
- when a Pod gets a deletionTimestamp, stops its processes (SIGTERM to the process group, SIGKILL
  after the grace period, capped by `stop_timeout`), deletes it with gracePeriodSeconds=0 (there is
  no other kubelet to finish graceful deletion) and takes its address off lo;
- on close, stops every process it started (by PID), takes its addresses off lo and deletes its Node.

Environment variables of a container (value, $(VAR) references, fieldRef, configMapKeyRef,
secretKeyRef, envFrom) are resolved and given to its process on top of the suite's own. configMap,
secret and emptyDir volumes are written to a directory per Pod; `Container.local_path` maps a path
under a mount to the file there (a program rewrites its arguments with it). Init containers,
ephemeral containers and other volume kinds are not run or provided.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from ..cluster import scratch
from ..kube import ApiError, Kube
from ..options import DEFAULT_MODEL_SERVER_IMAGE, DEFAULT_SENTINEL_IMAGE
from .backend import DEFAULT_H2C_PORT as ECHO_DEFAULT_H2C_PORT
from .backend import DEFAULT_PORT as ECHO_DEFAULT_PORT
from .forkserver import Forked, ForkServer
from .netns import Sandbox, start_process
from .probe import ANSWERS, NO_ANSWER

log = logging.getLogger(__name__)

POD_CIDR = "10.244.0.0/16"
NODE_NAME = "embedded-node"
NO_PROGRAM = "NoProgramForImage"  # the waiting reason of a container whose image runs no program here
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds the `conformance` package
# A listening socket's line of /proc/net/tcp{,6}: "  sl  local_address rem_address   st ...", st 0A
# (TCP_LISTEN). The table also holds every connection of the sandbox (thousands of TIME_WAIT ones after
# a burst of requests), so the listeners are picked out by one regex rather than line by line.
_LISTENER = re.compile(r"^\s*\d+: ([0-9A-F]+):([0-9A-F]{4}) [0-9A-F]+:[0-9A-F]{4} 0A ", re.M)
_LISTENING_FRESH = 0.05  # seconds a look at the listeners serves every Pod worker that asks
_PROBE = "conformance.traffic.probe"  # the gRPC readiness probe, one of forkserver.PROGRAMS
_PROBE_TIMEOUT = 2.0  # seconds a gRPC readiness probe may take (it gives up by itself after one)


class Unsupported(Exception):
    """Raised by a Program: this container cannot run here; the Pod stays Pending with this message."""


@dataclass
class Container:
    """What a Program is given: one container of a Pod, with its address and resolved environment."""

    pod: dict
    spec: dict  # the container's entry in pod.spec.containers
    ip: str  # the Pod's address (inside the sandbox)
    host_ip: str
    env: dict[str, str]  # the container's environment, resolved
    mounts: dict[str, Path] = field(default_factory=dict)  # mountPath -> the local directory it stands for

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def image(self) -> str:
        return self.spec.get("image", "")

    @property
    def pod_name(self) -> str:
        return self.pod["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.pod["metadata"]["namespace"]

    @property
    def ports(self) -> list[int]:
        """The container's TCP containerPorts."""
        return [p["containerPort"] for p in self.spec.get("ports") or [] if p.get("protocol", "TCP") == "TCP"]

    def local_path(self, path: str) -> str:
        """The local file that stands for `path` inside the container (a path under one of its mounts)."""
        for mount, local in sorted(self.mounts.items(), key=lambda m: -len(m[0])):
            rest = os.path.relpath(path, mount)
            if not rest.startswith(".."):
                return str(local / rest) if rest != "." else str(local)
        raise Unsupported(f"container {self.name}: {path} is under no configMap, secret or emptyDir volume mount")


@dataclass
class Launch:
    """How a Program runs a container: its command line, environment, and the ports it listens on."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)  # on top of the suite's and the container's
    ports: Iterable[int] = ()  # listened on at the Pod's address (or all addresses) once it is up
    files: Iterable[str | os.PathLike] = ()  # config files it reads (the guard scans them)
    cwd: str | None = None
    # The same program as (module, args), a module of this package that `forkserver.PROGRAMS` names: the
    # kubelet then forks it from a warm interpreter inside the sandbox instead of starting argv.
    entry: tuple[str, list[str]] | None = None


Program = Callable[[Container], Launch]


def model_server(c: Container) -> Launch:
    """Gateway API's echo server, as `conformance.traffic.backend`.

    Like echo-basic, it serves HTTP/1.1 on HTTP_PORT (default 3000) and h2c on H2C_PORT (default
    3001), whatever containerPorts say: a Pod that declares another port and probes it stays NotReady,
    and two containers of one Pod that leave H2C_PORT alike cannot both start, as on a real cluster
    (upstream's data-parallel Pods give each container its own HTTP_PORT and H2C_PORT).
    """
    port = int(c.env.get("HTTP_PORT") or ECHO_DEFAULT_PORT)
    h2c_port = int(c.env.get("H2C_PORT") or ECHO_DEFAULT_H2C_PORT)
    return _python("conformance.traffic.backend",
                   ["--address", c.ip, "--port", str(port), "--h2c-port", str(h2c_port),
                    "--pod", c.env.get("POD_NAME", c.pod_name), "--namespace", c.env.get("NAMESPACE", c.namespace)],
                   ports=[port, h2c_port])


def _python(module: str, args: list[str], ports: list[int]) -> Launch:
    """A Launch of a program of this package: forked from the kubelet's fork server, or else run as
    `python -S -m module args` (-S: it needs the standard library alone, and skipping site halves its start)."""
    pythonpath = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)
    return Launch(argv=[sys.executable, "-S", "-m", module, *args], env={"PYTHONPATH": pythonpath}, ports=ports,
                  entry=(module, args))


def parse_netcat(argv: list[str]) -> tuple[int, int]:
    """(port, exit code once a connection came) of a Busybox netcat listener: `nc -l -p PORT [-e PROG]`.

    Also `busybox nc ...`, `/bin/nc ...`, `-pPORT`, and the flags -v and -n. PROG is `false` (exit 1) or
    `true` (exit 0); without -e, Busybox's nc would relay the connection until the peer closes it and
    then exit 0 (the sentinel exits 0 at once). ValueError says what else is not understood."""
    args = list(argv)
    if args and os.path.basename(args[0]) == "busybox":
        args = args[1:]
    if not args or os.path.basename(args[0]) != "nc":
        raise ValueError(f"{' '.join(argv) or 'no command'!r} is not `nc -l -p PORT [-e PROG]`")
    port, exit_code, listen, i = None, 0, False, 1
    while i < len(args):
        arg = args[i]
        if arg == "-e":
            prog = args[i + 1:]
            codes = {"false": 1, "true": 0}
            if len(prog) != 1 or os.path.basename(prog[0]) not in codes:
                raise ValueError(f"-e {' '.join(prog)!r}: the sentinel runs only `-e false` or `-e true`")
            exit_code = codes[os.path.basename(prog[0])]
            break
        if arg.startswith("-p"):
            value = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
            i += 0 if arg[2:] else 1
            if not value.isdigit() or not 0 < int(value) < 65536:
                raise ValueError(f"-p {value!r} is not a port")
            port = int(value)
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("lvn"):
            listen = listen or "l" in arg
        else:
            raise ValueError(f"{arg!r} is not understood (the sentinel runs `nc -l -p PORT [-e PROG]`)")
        i += 1
    if not listen or port is None:
        raise ValueError(f"{' '.join(argv)!r} does not listen on a port: the sentinel runs `nc -l -p PORT [-e PROG]`")
    return port, exit_code


def sentinel(c: Container) -> Launch:
    """A listener that exits on its first accepted connection (`conformance.traffic.sentinel`), for
    containers of the sentinel image that run Busybox's `nc -l -p PORT -e false` (rule T5: a connection
    shows in the Pod's status as an exited container). It listens at the Pod's address only."""
    try:
        port, exit_code = parse_netcat([*(c.spec.get("command") or []), *(c.spec.get("args") or [])])
    except ValueError as e:
        raise Unsupported(f"container {c.name}: {e}") from None
    return _python("conformance.traffic.sentinel",
                   ["--address", c.ip, "--port", str(port), "--exit-code", str(exit_code)], ports=[port])


def image_repository(image: str) -> str:
    """The image without its tag and digest: registry:5000/echo-basic:v1@sha256:... -> registry:5000/echo-basic."""
    image = image.split("@", 1)[0]
    head, _, last = image.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def default_programs() -> dict[str, Program]:
    """The model server images (any tag of Gateway API's echo server) -> the backend; the sentinel
    image (any tag of the default busybox) -> the sentinel."""
    return {DEFAULT_MODEL_SERVER_IMAGE: model_server, image_repository(DEFAULT_MODEL_SERVER_IMAGE): model_server,
            image_repository(DEFAULT_SENTINEL_IMAGE): sentinel}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the sandbox's sockets ---------------------------------------------------------------------------


def _hex_address(text: str) -> str:
    """An address of /proc/net/tcp{,6} (hex, 32-bit words in host order) as text."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return str(ipaddress.ip_address(words))


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP listener in the network namespace of process `pid`."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            text = Path(f"/proc/{pid}/net/{table}").read_text()
        except OSError:
            continue
        found.update((_hex_address(address), int(port, 16)) for address, port in _LISTENER.findall(text))
    return found


def _serves(listeners: set[tuple[str, int]], ip: str, port: int) -> bool:
    """Whether a connect to ip:port would find a listener (one on ip, or on every address)."""
    candidates = {ip, "0.0.0.0", "::"} if ipaddress.ip_address(ip).version == 4 else {ip, "::"}
    if ipaddress.ip_address(ip).version == 4:
        candidates.add(f"::ffff:{ip}")
    return any((a, port) in listeners for a in candidates)


# -- one running container, one pod ---------------------------------------------------------------------


@dataclass
class _Ctr:
    spec: dict
    launch: Launch | None = None
    env: dict[str, str] = field(default_factory=dict)  # the container's environment, resolved
    proc: subprocess.Popen | Forked | None = None
    log: Path | None = None
    ports: set[int] = field(default_factory=set)  # ready once these listen
    started_at: str | None = None
    restarts: int = 0
    last_exit: dict | None = None  # lastState.terminated
    exited: dict | None = None  # state.terminated, when it will not run again
    waiting: tuple[str, str] | None = None  # (reason, message)
    restart_at: float = 0.0
    listening: bool = False
    grpc: tuple[int, str] | None = None  # the readiness probe's gRPC health (port, service), if it has one
    probed: str = ""  # the health service's last answer (probe.ANSWERS), "" before the first

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ready(self) -> bool:
        """Running, its ports listening, and its gRPC readiness probe (if any) answered SERVING."""
        return self.alive and self.listening and (self.grpc is None or self.probed == "SERVING")


@dataclass
class _Run:
    """A Pod of this node, and the worker thread that runs it."""

    key: tuple[str, str]  # (namespace, name)
    uid: str
    pod: dict
    ctrs: list[_Ctr] = field(default_factory=list)
    ip: str | None = None
    dir: Path | None = None
    start_time: str | None = None
    deleting: bool = False  # a deletionTimestamp was seen: stop, then delete
    gone: bool = False  # the object is gone: stop
    closing: bool = False  # the kubelet closes: stop
    forced_unready: bool = False
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # condition -> (status, since)
    written: object = None  # the last status summary written
    wake: threading.Event = field(default_factory=threading.Event)
    lock: threading.RLock = field(default_factory=threading.RLock)
    thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self.deleting or self.gone or self.closing


class Kubelet:
    """Runs the Pods of one Node of the embedded cluster as processes inside `sandbox`.

    `kube`: a Kube, or a kubeconfig path (the kubelet makes its own client either way).
    `namespaces`: the namespaces whose Pods it runs; None: every namespace. `label_selector`: only
    the Pods it selects. Use it as a context manager, or `start()` and `close()`.
    """

    def __init__(self, kube: Kube | str | os.PathLike, sandbox: Sandbox, *,
                 namespaces: Iterable[str] | None = None, label_selector: str | None = None,
                 node_name: str = NODE_NAME, pod_cidr: str = POD_CIDR,
                 programs: Mapping[str, Program] | None = None, start_timeout: float = 2.0,
                 stop_timeout: float = 2.0, log_dir: str | os.PathLike | None = None):
        if isinstance(kube, Kube):
            self.kube = Kube(k8s.ApiClient(configuration=kube.api.configuration))
        else:
            self.kube = Kube(k8s_config.new_client_from_config(config_file=str(kube)))
        self.sandbox = sandbox
        self.namespaces = None if namespaces is None else list(namespaces)
        self.label_selector = label_selector
        self.node_name = node_name
        self.pod_cidr = ipaddress.ip_network(pod_cidr)
        if self.pod_cidr.is_loopback or self.pod_cidr.num_addresses < 4:
            raise ValueError(f"pod CIDR {pod_cidr}: pod addresses are not loopback and need room")
        self.node_ip = str(next(self.pod_cidr.hosts()))  # the node's own address on the pod network
        self.programs: dict[str, Program] = {**default_programs(), **(programs or {})}
        # How long the first status write waits for the containers to listen; a Pod whose containers take
        # longer shows Running and NotReady (with its podIP) until they do.
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout  # the longest a process gets between SIGTERM and SIGKILL
        self._own_dir = log_dir is None
        self.dir = Path(log_dir) if log_dir else None  # logs and volumes, one directory per Pod
        self._runs: dict[tuple[str, str], _Run] = {}
        self._finished: set[str] = set()  # uids of Pods done with (late events about them are ignored)
        self._lock = threading.RLock()
        self._listeners: tuple[float, set[tuple[str, int]]] = (0.0, set())  # (when, what): the last look
        self._listeners_lock = threading.Lock()
        self._next_ip = int(ipaddress.ip_address(self.node_ip)) + 1
        self._addresses: set[str] = set()  # the addresses this kubelet put on the sandbox's lo
        self._stop = threading.Event()
        self._watchers: list[threading.Thread] = []
        self._streams: set = set()  # open watch responses (closed on close)
        self._synced: list[threading.Event] = []
        self._node_created = False
        self._forks: ForkServer | None = None  # forks the programs of this package (Launch.entry)
        self.errors: list[str] = []  # what went wrong in the background, one line each

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, timeout: float = 10.0) -> Kubelet:
        """Register the Node, and run the Pods there are (returns once they are listed)."""
        if self.sandbox.holder_pid is None:
            raise RuntimeError("the kubelet runs Pods inside a network Sandbox: start it first")
        if self.dir is None:
            self.dir = scratch.mkdtemp("kubelet")
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._forks = ForkServer(self.sandbox)
            self._register_node()
            for namespace in self.namespaces if self.namespaces is not None else [None]:
                self._watch(namespace)
            deadline = time.monotonic() + timeout
            for synced in self._synced:
                if not synced.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"kubelet {self.node_name}: the Pods were not listed within {timeout:.0f}s: "
                                       + "; ".join(self.errors[-3:]))
        except BaseException:
            self.close()
            raise
        return self

    def add_namespace(self, namespace: str) -> None:
        """Also run the Pods of `namespace` (when the kubelet was told namespaces)."""
        if self.namespaces is None or namespace in self.namespaces:
            return
        self.namespaces.append(namespace)
        self._watch(namespace)

    def close(self) -> None:
        """Stop every process this kubelet started, take its addresses off lo, delete its Node."""
        self._stop.set()
        for stream in list(self._streams):
            _shutdown(stream)
        for watcher in self._watchers:
            watcher.join(5)
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.closing = True
            run.wake.set()
        for run in runs:
            if run.thread is not None:
                run.thread.join(self.stop_timeout + 10)
            self._stop_processes(run)  # if its worker never got there
        if self._forks is not None:
            self._forks.close()
            self._forks = None
        self._release([*self._addresses])
        if self._node_created:
            try:
                self.kube.request("DELETE", f"/api/v1/nodes/{self.node_name}")
            except ApiError as e:
                if e.status != 404:
                    self.errors.append(f"deleting node {self.node_name}: {e}")
            except Exception as e:  # noqa: BLE001 (the cluster may be gone first: nothing to delete then)
                self.errors.append(f"deleting node {self.node_name}: {e}")
            self._node_created = False
        try:
            self.kube.api.close()
        except Exception:  # noqa: BLE001 (closing a pool)
            pass
        if self._own_dir and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- what tests and other components ask ---------------------------------------------------------

    def register(self, image: str, program: Program) -> None:
        """Run `program` for containers of `image` (an image with its tag, or a repository for any tag)."""
        self.programs[image] = program

    def program_for(self, image: str) -> Program | None:
        return self.programs.get(image) or self.programs.get(image_repository(image))

    def set_ready(self, namespace: str, name: str, ready: bool) -> None:
        """Force the Pod NotReady (False), or let its probes decide again (True); the status is written
        before this returns."""
        run = self._run(namespace, name)
        with run.lock:
            run.forced_unready = not ready
            if run.start_time is not None:
                self._write_status(run)

    def pod_ip(self, namespace: str, name: str) -> str | None:
        return self._run(namespace, name).ip

    def pids(self, namespace: str, name: str) -> list[int]:
        """The PIDs of the Pod's running containers."""
        return [c.proc.pid for c in self._run(namespace, name).ctrs if c.alive]

    def logs(self, namespace: str, name: str, container: str | None = None) -> str:
        """What a container of the Pod (its first, unless named) wrote on stdout and stderr."""
        run = self._run(namespace, name)
        ctr = next((c for c in run.ctrs if container in (None, c.spec["name"])), None)
        if ctr is None or ctr.log is None or not ctr.log.exists():
            return ""
        return ctr.log.read_text(errors="replace")

    def _run(self, namespace: str, name: str) -> _Run:
        with self._lock:
            run = self._runs.get((namespace, name))
        if run is None:
            raise KeyError(f"pod {namespace}/{name} is not running on node {self.node_name}")
        return run

    # -- the Node --------------------------------------------------------------------------------

    @property
    def node_labels(self) -> dict[str, str]:
        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
        return {"kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch}

    def _register_node(self) -> None:
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.node_name, "labels": self.node_labels},
            "spec": {"podCIDR": str(self.pod_cidr), "podCIDRs": [str(self.pod_cidr)]},
        }
        try:
            self.kube.request("POST", "/api/v1/nodes", body=node)
        except ApiError as e:
            if e.status == 409:
                raise RuntimeError(f"node {self.node_name} exists already: another kubelet owns it") from None
            raise
        self._node_created = True
        now = _now()
        capacity = {"cpu": "8", "memory": "16Gi", "pods": "250", "ephemeral-storage": "100Gi"}
        status = {
            "capacity": capacity, "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": self.node_ip},
                          {"type": "Hostname", "address": self.node_name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "the embedded cluster's kubelet stand-in is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": "embedded", "operatingSystem": "linux",
                         "architecture": self.node_labels["kubernetes.io/arch"], "containerRuntimeVersion": "local"},
        }
        self.kube.request("PATCH", f"/api/v1/nodes/{self.node_name}/status", body={"status": status},
                          content_type="application/merge-patch+json")
        if self.node_ip not in self.sandbox.addresses:
            self._add_address(self.node_ip)

    # -- addresses ---------------------------------------------------------------------------------

    def _allocate(self) -> str:
        """A pod address of the podCIDR that is on no lo of this sandbox (addresses are not reused)."""
        with _ADDRESSES:
            last = int(self.pod_cidr.broadcast_address) - 1
            start = self._next_ip
            while True:
                if self._next_ip > last:
                    self._next_ip = int(self.pod_cidr.network_address) + 2
                ip = str(ipaddress.ip_address(self._next_ip))
                self._next_ip += 1
                if ip not in self.sandbox.addresses and ip != self.node_ip:
                    self._add_address(ip)
                    return ip
                if self._next_ip == start:
                    raise RuntimeError(f"pod CIDR {self.pod_cidr} is full")

    def _add_address(self, ip: str) -> None:
        self.sandbox.add_address(ip)
        self._addresses.add(ip)

    def _release(self, ips: list[str]) -> None:
        """Take addresses off the sandbox's lo (a deleted Pod's address reaches nothing)."""
        ips = [ip for ip in ips if ip in self._addresses]
        if not ips or self.sandbox.holder_pid is None:
            return
        try:
            self.sandbox.remove_address(*ips)
        except (OSError, subprocess.SubprocessError) as e:
            self.errors.append(f"removing {', '.join(ips)} from the sandbox: {e}")
        with _ADDRESSES:
            self._addresses.difference_update(ips)

    # -- watching Pods --------------------------------------------------------------------------------

    def _watch(self, namespace: str | None) -> None:
        synced = threading.Event()
        self._synced.append(synced)
        thread = threading.Thread(target=self._watch_loop, args=(namespace, synced), daemon=True,
                                  name=f"kubelet-watch-{namespace or 'all'}")
        self._watchers.append(thread)
        thread.start()

    def _watch_loop(self, namespace: str | None, synced: threading.Event) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        selector = [("labelSelector", self.label_selector)] if self.label_selector else []
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listed = self.kube.request("GET", path, query=selector)
                    version = listed["metadata"]["resourceVersion"]
                    present = set()
                    for pod in listed.get("items") or []:
                        present.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
                        self._handle("ADDED", pod)
                    with self._lock:  # what went while nobody watched
                        lost = [r for r in self._runs.values()
                                if r.key not in present and namespace in (None, r.key[0])]
                    for run in lost:
                        self._handle("DELETED", run.pod)
                    synced.set()
                query = [*selector, ("watch", "true"), ("resourceVersion", version),
                         ("allowWatchBookmarks", "true"), ("timeoutSeconds", "300")]
                stream = self.kube.request("GET", path, query=query, stream=True, timeout=(5, 330))
                self._streams.add(stream)
                try:
                    if self._stop.is_set():
                        return
                    for event in _events(stream):
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                version = None  # too old: list again
                            break
                        version = obj.get("metadata", {}).get("resourceVersion", version)
                        if kind != "BOOKMARK":
                            self._handle(kind, obj)
                finally:
                    self._streams.discard(stream)
                    stream.release_conn()
            except Exception as e:  # noqa: BLE001 (a watch that breaks is started again)
                if self._stop.is_set():
                    return
                if isinstance(e, ApiError) and e.status == 410:
                    version = None
                self.errors.append(f"watching pods in {namespace or 'all namespaces'}: {e}")
                log.warning("kubelet %s: watching pods: %s", self.node_name, e)
                self._stop.wait(0.5)

    def _handle(self, kind: str, pod: dict) -> None:
        md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        key, uid = (md.get("namespace", ""), md.get("name", "")), md.get("uid", "")
        if self._stop.is_set():
            return
        if not spec.get("nodeName") and kind != "DELETED":
            if not md.get("deletionTimestamp") and self._fits(pod):
                self._bind(pod)
            return
        with self._lock:
            if uid in self._finished:
                return
            run = self._runs.get(key)
            if run is not None and run.uid != uid:  # an older Pod of that name: it is gone
                run.gone = True
                run.wake.set()
                run = None
            if kind == "DELETED":
                if run is not None:
                    run.gone = True
                    run.wake.set()
                return
            if spec.get("nodeName") != self.node_name:
                return
            if run is None:
                terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                if terminal and not md.get("deletionTimestamp"):
                    return
                run = _Run(key, uid, pod)
                self._runs[key] = run
                run.thread = threading.Thread(target=self._work, args=(run,), daemon=True,
                                              name=f"kubelet-pod-{key[0]}/{key[1]}")
                run.thread.start()
            if _gates(run.pod) != _gates(pod):  # a readiness gate's condition, written by others: Ready follows
                run.wake.set()
            run.pod = pod
            if md.get("deletionTimestamp"):
                run.deleting = True
                run.wake.set()

    def _fits(self, pod: dict) -> bool:
        """The minimal scheduler's one test: the Pod's nodeSelector matches this Node's labels."""
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        return all(self.node_labels.get(k) == v for k, v in selector.items())

    def _bind(self, pod: dict) -> None:
        md = pod["metadata"]
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": md["name"], "namespace": md["namespace"], "uid": md["uid"]},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}}
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/binding",
                              body=binding)
        except ApiError as e:
            if e.status not in (404, 409):  # gone, or bound already (by another kubelet, say)
                self.errors.append(f"binding pod {md['namespace']}/{md['name']}: {e}")

    # -- one Pod's worker ---------------------------------------------------------------------------

    def _work(self, run: _Run) -> None:
        log.debug("kubelet %s: pod %s/%s: worker started", self.node_name, *run.key)
        try:
            started, retry_at, last_listen_check = False, 0.0, 0.0
            while not run.stopping:
                if not started:  # a Pod that cannot start yet (a missing ConfigMap, say) is tried again
                    if time.monotonic() >= retry_at:
                        started, retry_at = self._start_pod(run), time.monotonic() + 1.0
                    if not started:
                        run.wake.wait(0.2)
                        run.wake.clear()
                    continue
                ready = all(c.ready for c in run.ctrs)
                run.wake.wait(0.2 if ready else 0.05)
                run.wake.clear()
                if run.stopping:
                    continue
                with run.lock:
                    now = time.monotonic()
                    check_ports = not ready or now - last_listen_check > 1.0
                    self._tend(run, check_ports)
                    if check_ports:
                        last_listen_check = now
                    self._post_status(run)
        except Exception as e:  # noqa: BLE001 (a worker that fails says so and stops its Pod)
            if not self._stop.is_set():
                self.errors.append(f"running pod {run.key[0]}/{run.key[1]}: {e}")
                log.exception("kubelet %s: running pod %s/%s", self.node_name, *run.key)
        finally:
            self._stop_processes(run)
            if run.deleting and not run.gone and not run.closing:
                self._finish_deletion(run)
            if run.deleting or run.gone:
                with self._lock:
                    self._finished.add(run.uid)
                    if self._runs.get(run.key) is run:
                        del self._runs[run.key]
                self._release([run.ip] if run.ip and run.ip != self.node_ip else [])

    def _start_pod(self, run: _Run) -> bool:
        """Start the Pod's containers and write its first status; False when it cannot start (yet)."""
        pod = run.pod
        spec = pod.get("spec") or {}
        run.ctrs = [_Ctr(c) for c in spec.get("containers") or []]
        run.dir = self.dir / f"{run.key[0]}_{run.key[1]}_{run.uid[:8]}"
        run.dir.mkdir(parents=True, exist_ok=True)
        problem = None
        if spec.get("initContainers"):
            problem = ("InitContainersNotRun", "the embedded cluster's kubelet does not run init containers")
        for ctr in run.ctrs:
            if self.program_for(ctr.spec.get("image", "")) is None:
                problem = problem or (NO_PROGRAM, f"the embedded cluster's kubelet has no program for image "
                                      f"{ctr.spec.get('image')!r} (it runs: {', '.join(sorted(self.programs))}); "
                                      "a component registers one with Kubelet.register")
        if problem is None:
            if run.ip is None:
                run.ip = self.node_ip if spec.get("hostNetwork") else self._allocate()
            try:
                mounts = self._volumes(run)
                for ctr in run.ctrs:
                    ctr.env = self._env(run, ctr.spec)
                    c = Container(pod, ctr.spec, run.ip, self.node_ip, dict(ctr.env))
                    c.mounts = {m["mountPath"]: mounts[m["name"]] for m in ctr.spec.get("volumeMounts") or []
                                if m.get("name") in mounts}
                    ctr.launch = self.program_for(c.image)(c)
                    ctr.ports = set(ctr.launch.ports) | _probe_ports(ctr.spec)
                    ctr.grpc = _grpc_probe(ctr.spec)
                    ctr.log = run.dir / f"{ctr.spec['name']}.log"
            except Unsupported as e:
                problem = ("CreateContainerConfigError", str(e))
        run.start_time = run.start_time or _now()
        if problem is not None:
            for ctr in run.ctrs:
                ctr.waiting = problem
            with run.lock:
                self._post_status(run)
            return False
        for ctr in run.ctrs:
            self._launch(run, ctr)
        deadline = time.monotonic() + self.start_timeout
        while not run.stopping and time.monotonic() < deadline:
            self._tend(run, check_ports=True, restart=False)
            if all(c.listening or not c.alive for c in run.ctrs):
                break
            run.wake.wait(0.01)
        with run.lock:
            self._post_status(run)
        return True

    def _launch(self, run: _Run, ctr: _Ctr) -> None:
        """Start the container's process inside the sandbox (a failure to start is retried with backoff)."""
        launch = ctr.launch
        env = {**os.environ, **ctr.env, **launch.env}
        if ctr.proc is not None:  # it ran before
            ctr.restarts += 1
        try:
            if launch.entry is not None and self._forks is not None:  # inside the sandbox, as it is
                ctr.proc = self._forks.spawn(*launch.entry, env=env, log=ctr.log, cwd=launch.cwd)
            else:
                with open(ctr.log, "ab") as out:
                    ctr.proc = start_process(launch.argv, [run.ip], sandbox=self.sandbox, env=env,
                                             files=launch.files, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, cwd=launch.cwd)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            ctr.proc, ctr.listening = None, False
            ctr.restart_at = time.monotonic() + min(10.0, 0.5 * 2 ** ctr.restarts)
            ctr.waiting = ("RunContainerError", f"cannot start {launch.argv[0]}: {e}")
            return
        ctr.started_at, ctr.waiting, ctr.listening = _now(), None, False
        log.debug("kubelet %s: pod %s/%s: container %s started, pid %d", self.node_name, *run.key,
                  ctr.spec["name"], ctr.proc.pid)

    def _listening(self) -> set[tuple[str, int]]:
        """The sandbox's TCP listeners, as seen at most _LISTENING_FRESH seconds ago: every Pod worker asks
        several times a second, and one look serves them all."""
        with self._listeners_lock:
            when, found = self._listeners
            if time.monotonic() - when > _LISTENING_FRESH:
                found = listening(self.sandbox.holder_pid)
                self._listeners = (time.monotonic(), found)
            return found

    def _tend(self, run: _Run, check_ports: bool, restart: bool = True) -> None:
        """Look at each container: did it exit (restart it per restartPolicy), does it listen."""
        policy = (run.pod.get("spec") or {}).get("restartPolicy", "Always")
        listeners = self._listening() if check_ports and self.sandbox.holder_pid else None
        for ctr in run.ctrs:
            if ctr.launch is None:
                continue
            code = ctr.proc.poll() if ctr.proc is not None else -1  # -1: it could not be started
            if ctr.proc is not None and code is not None and ctr.started_at is not None:  # it exited (just now)
                ctr.last_exit = {"exitCode": code if code >= 0 else 128 - code,
                                 "reason": "Completed" if code == 0 else "Error",
                                 "startedAt": ctr.started_at, "finishedAt": _now()}
                ctr.started_at, ctr.listening = None, False
                if policy == "Always" or (policy == "OnFailure" and code != 0):
                    backoff = min(10.0, 0.5 * 2 ** ctr.restarts)
                    ctr.restart_at = time.monotonic() + backoff
                    ctr.waiting = ("CrashLoopBackOff", f"back-off {backoff:g}s restarting failed container "
                                   f"{ctr.spec['name']}; its log: {ctr.log}")
                else:
                    ctr.exited, ctr.waiting = ctr.last_exit, None
            if code is not None and ctr.exited is None and restart and time.monotonic() >= ctr.restart_at:
                self._launch(run, ctr)
                code = None if ctr.proc is not None else -1
            if code is None and listeners is not None:
                ctr.listening = all(_serves(listeners, run.ip, port) for port in ctr.ports)
                if ctr.grpc is not None:  # asked on every look at the ports: 20 times a second until Ready
                    ctr.probed = self._probe(run.ip, *ctr.grpc) if ctr.listening else ""

    def _probe(self, ip: str, port: int, service: str) -> str:
        """Ask the gRPC health service at ip:port, from inside the sandbox (a fork of the fork server)."""
        forks = self._forks
        if forks is None:  # closing
            return NO_ANSWER
        try:
            child = forks.spawn(_PROBE, [ip, str(port), service], env={}, log=os.devnull)
        except (OSError, ValueError):  # (a probe that cannot run is a failed probe, never a failed Pod)
            return NO_ANSWER
        try:
            code = child.wait(_PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:  # (the probe itself gives up after a second)
            child.kill()
            return NO_ANSWER
        return ANSWERS.get(code, NO_ANSWER)

    # -- status ------------------------------------------------------------------------------------

    def _post_status(self, run: _Run) -> None:
        """Write the status if it changed; a failure is noted and the write retried on the next turn."""
        try:
            self._write_status(run)
        except Exception as e:  # noqa: BLE001 (the API server may be away for a moment)
            if not self._stop.is_set():
                self.errors.append(f"writing the status of pod {run.key[0]}/{run.key[1]}: {e}")
                log.warning("kubelet %s: writing the status of pod %s/%s: %s", self.node_name, *run.key, e)

    def _write_status(self, run: _Run) -> None:
        """Write the Pod's status if it changed since the last write (call with run.lock held)."""
        statuses, ready_all = [], True
        for ctr in run.ctrs:
            ready = ctr.ready and not run.forced_unready
            ready_all = ready_all and ready
            if ctr.alive:
                state = {"running": {"startedAt": ctr.started_at}}
            elif ctr.exited is not None:
                state = {"terminated": ctr.exited}
            else:
                reason, message = ctr.waiting or ("ContainerCreating", "")
                state = {"waiting": {"reason": reason, "message": message}}
            status = {"name": ctr.spec["name"], "image": ctr.spec.get("image", ""), "imageID": "",
                      "ready": bool(ready), "started": ctr.alive, "restartCount": ctr.restarts, "state": state}
            if ctr.alive:
                status["containerID"] = f"embedded://{ctr.proc.pid}"
            if ctr.last_exit is not None:
                status["lastState"] = {"terminated": ctr.last_exit}
            statuses.append(status)
        launched = run.ip is not None
        if all(c.exited is not None for c in run.ctrs) and run.ctrs:
            phase = "Succeeded" if all(c.exited["exitCode"] == 0 for c in run.ctrs) else "Failed"
        else:
            phase = "Running" if launched and any(c.proc is not None for c in run.ctrs) else "Pending"
        unready = [c.spec["name"] for c, s in zip(run.ctrs, statuses, strict=True) if not s["ready"]]
        gates = _gates(run.pod)
        gates_ready = all(status == "True" for _, status in gates)
        if run.forced_unready:
            reason, message = "ForcedNotReady", "set NotReady by the embedded cluster's kubelet (set_ready)"
        elif unready:
            waiting = next((c.waiting for c in run.ctrs if c.waiting), None)
            reason = "ContainersNotReady"
            message = f"containers with unready status: [{' '.join(unready)}]"
            if waiting and waiting[1]:
                message += f": {waiting[1]}"
            elif launched:
                ports = sorted({p for c in run.ctrs if not c.listening for p in c.ports})
                message += f": not listening on {run.ip} port(s) {', '.join(map(str, ports))}" if ports else ""
                probed = [f"{c.spec['name']}'s gRPC health service (port {c.grpc[0]}, service {c.grpc[1]!r}) "
                          f"answered {c.probed}" for c in run.ctrs if c.listening and c.grpc and c.probed != "SERVING"]
                message += f": readiness probe failed: {'; '.join(probed)}" if probed else ""
        else:
            reason = message = ""
        # Ready also needs every readiness gate's condition True (a kubelet's wording when one is not).
        ready_reason, ready_message = reason, message
        if ready_all and not gates_ready:
            ready_reason = "ReadinessGatesNotReady"
            ready_message = ", ".join(
                f'corresponding condition of pod readiness gate "{kind}" does not exist.' if status is None
                else f'the status of pod readiness gate "{kind}" is not "True", but {status}'
                for kind, status in gates if status != "True")
        summary = (phase, tuple((s["ready"], str(s["state"]), s["restartCount"]) for s in statuses),
                   run.forced_unready, reason, gates)
        if summary == run.written:
            return
        conditions = [self._condition(run, "PodScheduled", True),
                      self._condition(run, "Initialized", True),
                      self._condition(run, "ContainersReady", ready_all, reason, message),
                      self._condition(run, "Ready", ready_all and gates_ready, ready_reason, ready_message)]
        status = {"phase": phase, "conditions": conditions, "containerStatuses": statuses,
                  "hostIP": self.node_ip, "hostIPs": [{"ip": self.node_ip}], "startTime": run.start_time}
        if launched:
            status |= {"podIP": run.ip, "podIPs": [{"ip": run.ip}]}
        try:  # a strategic merge patch: conditions merge by type, so those of others (readiness gates) stay
            self.kube.request("PATCH", f"/api/v1/namespaces/{run.key[0]}/pods/{run.key[1]}/status",
                              body={"status": status}, content_type="application/strategic-merge-patch+json")
        except ApiError as e:
            if e.status == 404:
                run.gone = True
                return
            raise
        run.written = summary
        log.debug("kubelet %s: pod %s/%s: status %s, ready %s", self.node_name, *run.key, phase,
                  ready_all and gates_ready)

    def _condition(self, run: _Run, kind: str, true: bool, reason: str = "", message: str = "") -> dict:
        status = "True" if true else "False"
        if run.transitions.get(kind, ("", ""))[0] != status:
            run.transitions[kind] = (status, _now())
        # None removes a field in a strategic merge patch: a condition that turns True loses its old reason.
        condition = {"type": kind, "status": status, "lastTransitionTime": run.transitions[kind][1],
                     "lastProbeTime": None, "reason": None, "message": None}
        if not true and reason:
            condition |= {"reason": reason, "message": message}
        return condition

    # -- stopping ----------------------------------------------------------------------------------

    def _stop_processes(self, run: _Run) -> None:
        """SIGTERM each container's process group, SIGKILL what is left after the grace period."""
        grace = run.pod["metadata"].get("deletionGracePeriodSeconds",
                                        (run.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        procs = [c.proc for c in run.ctrs if c.proc is not None and c.proc.poll() is None]
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + min(float(grace if grace is not None else 30), self.stop_timeout)
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()

    def _finish_deletion(self, run: _Run) -> None:
        """Delete the Pod for good: its processes are stopped and no other kubelet will say so."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": run.uid}}
        for attempt in range(5):
            try:
                self.kube.request("DELETE", f"/api/v1/namespaces/{run.key[0]}/pods/{run.key[1]}", body=body)
                return
            except ApiError as e:
                if e.status in (404, 409):  # gone already, or another Pod of that name now
                    return
                error = e
            except Exception as e:  # noqa: BLE001 (the API server may be away for a moment)
                error = e
            if self._stop.wait(0.1 * 2 ** attempt):
                break
        self.errors.append(f"deleting pod {run.key[0]}/{run.key[1]}: {error}")

    # -- a container's environment and volumes ----------------------------------------------------------

    def _env(self, run: _Run, spec: dict) -> dict[str, str]:
        """The container's environment: envFrom, then env (with $(VAR) references expanded)."""
        namespace = run.key[0]
        env: dict[str, str] = {}
        for source in spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for ref, getter in (("configMapRef", self._configmap), ("secretRef", self._secret)):
                if ref in source:
                    data = getter(namespace, source[ref]["name"], source[ref].get("optional", False))
                    env.update({prefix + k: v for k, v in data.items()})
        for var in spec.get("env") or []:
            if "valueFrom" not in var:
                env[var["name"]] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                                          lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]),
                                          var.get("value", ""))
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                env[var["name"]] = self._field(run, source["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in source or "secretKeyRef" in source:
                ref = source.get("configMapKeyRef") or source["secretKeyRef"]
                getter = self._configmap if "configMapKeyRef" in source else self._secret
                data = getter(namespace, ref["name"], ref.get("optional", False))
                if ref["key"] in data:
                    env[var["name"]] = data[ref["key"]]
                elif not ref.get("optional"):
                    raise Unsupported(f"couldn't find key {ref['key']} in {ref['name']}")
        return env

    def _field(self, run: _Run, path: str) -> str:
        md, spec = run.pod["metadata"], run.pod.get("spec") or {}
        if match := re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path):
            return (md.get(match[1]) or {}).get(match[2], "")
        values = {
            "metadata.name": md["name"], "metadata.namespace": md["namespace"], "metadata.uid": md["uid"],
            "spec.nodeName": self.node_name, "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.hostIP": self.node_ip, "status.hostIPs": self.node_ip,
            "status.podIP": run.ip or "", "status.podIPs": run.ip or "",
        }
        if path not in values:
            raise Unsupported(f"fieldRef {path} is not provided by the embedded cluster's kubelet")
        return values[path]

    def _configmap(self, namespace: str, name: str, optional: bool = False) -> dict[str, str]:
        return self._data(f"/api/v1/namespaces/{namespace}/configmaps/{name}", f"configmap {name!r}", optional)

    def _secret(self, namespace: str, name: str, optional: bool = False) -> dict[str, str]:
        data = self._data(f"/api/v1/namespaces/{namespace}/secrets/{name}", f"secret {name!r}", optional)
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}

    def _data(self, path: str, what: str, optional: bool) -> dict[str, str]:
        try:
            obj = self.kube.request("GET", path)
        except ApiError as e:
            if e.status == 404 and optional:
                return {}
            if e.status == 404:
                raise Unsupported(f"{what} not found") from None
            raise
        return {**(obj.get("data") or {}), **{k: v for k, v in (obj.get("stringData") or {}).items()}}

    def _volumes(self, run: _Run) -> dict[str, Path]:
        """Write the Pod's configMap, secret and emptyDir volumes; volume name -> its directory."""
        mounted = {m["name"] for c in run.ctrs for m in c.spec.get("volumeMounts") or []}
        found: dict[str, Path] = {}
        for volume in (run.pod.get("spec") or {}).get("volumes") or []:
            name = volume["name"]
            if name not in mounted:
                continue
            where = run.dir / "volumes" / name
            where.mkdir(parents=True, exist_ok=True)
            if "emptyDir" in volume:
                found[name] = where
                continue
            kind = "configMap" if "configMap" in volume else "secret" if "secret" in volume else None
            if kind is None:
                continue
            source = volume[kind]
            ref = source.get("name") or source.get("secretName")
            getter = self._configmap if kind == "configMap" else self._secret
            data = getter(run.key[0], ref, source.get("optional", False))
            items = source.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    raise Unsupported(f"volume {name}: key {item['key']} not in {kind} {ref}")
                target = where / item["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(data[item["key"]])
            found[name] = where
        return found


# -- helpers ---------------------------------------------------------------------------------------

_ADDRESSES = threading.RLock()  # allocating an address and putting it on lo is one step


def _probe_ports(spec: dict) -> set[int]:
    """The ports the container's readiness and startup probes look at (tcpSocket, httpGet, grpc)."""
    named = {p.get("name"): p["containerPort"] for p in spec.get("ports") or [] if p.get("name")}
    ports = set()
    for probe in (spec.get("readinessProbe"), spec.get("startupProbe")):
        for handler in ("tcpSocket", "httpGet", "grpc"):
            port = ((probe or {}).get(handler) or {}).get("port")
            if isinstance(port, int):
                ports.add(port)
            elif isinstance(port, str):
                ports.add(int(port) if port.isdigit() else named.get(port, -1))
    return {p for p in ports if p > 0}


def _grpc_probe(spec: dict) -> tuple[int, str] | None:
    """The container's gRPC readiness probe as (port, service), or None."""
    grpc = (spec.get("readinessProbe") or {}).get("grpc") or {}
    port = grpc.get("port")
    return (port, grpc.get("service") or "") if isinstance(port, int) and port > 0 else None


def _gates(pod: dict) -> tuple[tuple[str, str | None], ...]:
    """(conditionType, its status in status.conditions or None) of each of the Pod's readiness gates."""
    found = {c.get("type"): c.get("status") for c in ((pod or {}).get("status") or {}).get("conditions") or []}
    return tuple((g["conditionType"], found.get(g["conditionType"]))
                 for g in ((pod or {}).get("spec") or {}).get("readinessGates") or [] if g.get("conditionType"))


def _events(stream) -> Iterable[dict]:
    buf = b""
    for chunk in stream.stream(amt=None, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


def _shutdown(stream) -> None:
    """Make a watch response's blocked read return, from another thread."""
    try:
        stream.shutdown()
    except Exception:  # noqa: BLE001 (it may be closed already)
        pass


def _signal_group(proc: subprocess.Popen | Forked, sig: signal.Signals) -> None:
    if isinstance(proc, Forked):  # its fork server signals the group while the child is unreaped
        proc.send_signal(sig)
    elif proc.poll() is None:  # not reaped: its PID (and group) cannot have been reused
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
