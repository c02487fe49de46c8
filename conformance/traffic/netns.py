"""The traffic tier's network sandbox, and the guard that makes it the only place for pod addresses.

Why: traffic processes (backends, the EPP, the gateway proxy) are handed pod and Service addresses
such as 10.244.0.5. On this machine those addresses belong to nobody the suite knows; a process that
connects to one from the machine's own network namespace sends packets through the default route to
whatever answers there. SPEC section 10 makes it a hard rule that this be impossible by construction.

How:

- `Sandbox` is a network namespace the suite creates and owns (`unshare --net` as root, else a user
  namespace too, `unshare --user --map-root-user --net`). Its only interface is `lo`, which carries
  127.0.0.1 and one /32 (/128) per pod address (`Sandbox.add_address`); there is no route out, so a
  connect to any other address fails at once with ENETUNREACH. A small holder process keeps the
  namespace alive; processes enter it with `nsenter`, which joins the namespace before it executes
  the program, so no instruction of the program ever runs outside. On exit the sandbox stops what it
  started (by PID and process group), then anything else still inside the namespace (by PID), then
  the holder, and with it the namespace.
- `start_process` is the door through which the tier starts every traffic process. It looks at the
  addresses the process is handed (its argv, the environment it is given, the config files it reads,
  and any addresses the caller names) and refuses, with `NetworkSafetyError`, to start one that is
  handed an address outside loopback unless a `Sandbox` is given.
- `available()` says whether a namespace can be made here: None, or the one line why not, with which
  the tier is skipped (never run outside a namespace).
"""

from __future__ import annotations

import atexit
import functools
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# unshare's flags for a namespace of the suite's own: as root, a network namespace alone; otherwise
# (or where root may not make one) also a user namespace, in which this user is root.
_NET = ("--net",)
_USER_AND_NET = ("--user", "--map-root-user", "--net")
_TOOLS = {"unshare": "util-linux", "nsenter": "util-linux", "ip": "iproute2"}


class NetworkSafetyError(RuntimeError):
    """A traffic process would see a non-loopback address outside a sandbox, or a sandbox is not sealed."""


class SandboxUnavailable(RuntimeError):
    """No network namespace can be made on this machine (the message is `available()`'s one line)."""


def available() -> str | None:
    """None when a network namespace can be made here, else the one-line reason it cannot."""
    return _probe()[1]


@functools.cache
def _probe() -> tuple[tuple[str, ...], str | None]:
    """(unshare's flags that work here, None), or ((), the one-line reason that none do).

    A namespace is really made (and its lo brought up), so that a "yes" here means the sandbox starts.
    """
    if sys.platform != "linux":
        return (), f"traffic tier skipped: network namespaces need Linux, not {sys.platform}"
    for tool, package in _TOOLS.items():
        if shutil.which(tool) is None:
            return (), f"traffic tier skipped: `{tool}` ({package}) is not installed, so no network namespace"
    errors = []
    for flags in (_NET, _USER_AND_NET) if os.geteuid() == 0 else (_USER_AND_NET,):
        try:
            subprocess.run(
                ["unshare", *flags, "--", "ip", "link", "set", "lo", "up"],
                check=True, capture_output=True, text=True, timeout=10,
            )
        except subprocess.CalledProcessError as e:
            errors.append(f"`unshare {' '.join(flags)}`: {(e.stderr.strip().splitlines() or ['failed'])[-1]}")
        except subprocess.TimeoutExpired:
            errors.append(f"`unshare {' '.join(flags)}`: timed out")
        else:
            return flags, None
    return (), "traffic tier skipped: no network namespace can be made here: " + "; ".join(errors)


def _ns_id(path: str) -> tuple[int, int] | None:
    """The identity (device, inode) of the namespace a /proc/<pid>/ns/* link names; None if gone or hidden."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


class Sandbox:
    """A network namespace the suite owns: lo with 127.0.0.1 and the pod addresses, nothing else.

    Use it as a context manager. `popen` and `run` start processes inside it; `add_address` puts a
    pod address on its lo; `contains` tells whether a process is inside. Leaving the block (or the
    interpreter exiting) stops every process inside and removes the namespace.
    """

    def __init__(self, stop_timeout: float = 5.0):
        self.stop_timeout = stop_timeout  # how long a process may take to stop on SIGTERM before SIGKILL
        self.addresses: list[str] = []  # the pod addresses added to lo
        self._holder: subprocess.Popen | None = None
        self._fds: dict[str, int] = {}  # nsenter option ("net", "user") -> an fd pinning that namespace
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()  # components of the tier add and remove addresses from their threads

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def holder_pid(self) -> int | None:
        return self._holder.pid if self._holder else None

    def start(self) -> None:
        """Create the namespace, bring lo up, and check that it is sealed."""
        flags, reason = _probe()
        if reason:
            raise SandboxUnavailable(reason)
        atexit.register(self.close)
        # The holder unshares, brings lo up, says so, and then waits for EOF on stdin: the write end is
        # ours alone, so the holder (and the namespace) also goes when this interpreter dies.
        self._holder = subprocess.Popen(
            ["unshare", *flags, "--", "sh", "-c", "ip link set lo up && echo up && exec cat"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        if self._holder.stdout.readline().strip() != "up":
            error = self._holder.stderr.read().strip()  # it has exited: stderr is at EOF
            self.close()
            raise SandboxUnavailable(f"cannot make the network sandbox: {error or 'the holder exited'}")
        # Pin the namespaces by fd: nsenter then joins exactly these, whatever happens to the holder's PID.
        kinds = ("user", "net") if "--user" in flags else ("net",)
        self._fds = {kind: os.open(f"/proc/{self._holder.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
                     for kind in kinds}
        if self._identity() == _ns_id("/proc/self/ns/net"):  # cannot happen after "up"; never trust it
            self.close()
            raise NetworkSafetyError("the sandbox's holder is in this process's own network namespace")
        self.check()

    def check(self) -> None:
        """Raise NetworkSafetyError unless lo is the only interface and no route leads anywhere else."""
        out = self.run(["ip", "-o", "-batch", "-"], input="link show\nroute show table all\n").stdout.splitlines()
        links = [line.split(":")[1].strip() for line in out if re.match(r"\d+: ", line)]
        if links != ["lo"]:
            raise NetworkSafetyError(f"the network sandbox has interfaces other than lo: {links}")
        for route in (line for line in out if not re.match(r"\d+: ", line)):
            device = re.search(r"\bdev (\S+)", route)
            if route.startswith("default") or (device and device[1] != "lo"):
                raise NetworkSafetyError(f"the network sandbox has a route out: {route.strip()}")

    def add_address(self, *ips: str) -> None:
        """Put each pod address on the sandbox's lo, as a /32 (IPv4) or /128 (IPv6)."""
        addrs = [ipaddress.ip_address(ip) for ip in ips]
        if loopback := [str(a) for a in addrs if a.is_loopback]:
            raise ValueError(f"{', '.join(loopback)}: loopback is on lo already; pod addresses are not loopback")
        with self._lock:
            new = [a for a in addrs if str(a) not in self.addresses]
            if new:
                lines = "".join(f"address add {a}/{a.max_prefixlen} dev lo\n" for a in new)
                self.run(["ip", "-batch", "-"], input=lines)
                self.addresses += [str(a) for a in new]

    def remove_address(self, *ips: str) -> None:
        """Take pod addresses off the sandbox's lo (those not on it are ignored)."""
        with self._lock:
            gone = [ipaddress.ip_address(ip) for ip in ips if str(ipaddress.ip_address(ip)) in self.addresses]
            if gone:
                self.run(["ip", "-force", "-batch", "-"],
                         input="".join(f"address del {a}/{a.max_prefixlen} dev lo\n" for a in gone), check=False)
                self.addresses = [a for a in self.addresses if ipaddress.ip_address(a) not in gone]

    def listening(self, port: int, address: str | None = None) -> bool:
        """Whether some process inside listens on TCP `port` (on `address`, or on any address)."""
        pid = self.holder_pid
        if pid is None:
            return False
        want = None if address is None else ipaddress.ip_address(address)
        for table in ("tcp", "tcp6"):
            try:
                rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                local, state = row.split()[1], row.split()[3]
                host, hex_port = local.split(":")
                if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                    continue
                if want is None or _proc_net_address(host) in (want, ipaddress.ip_address("0.0.0.0"),
                                                               ipaddress.ip_address("::")):
                    return True
        return False

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start argv inside the namespace, in a session of its own; the sandbox stops it on exit."""
        proc = subprocess.Popen(self._enter(argv), **self._kw(kw), start_new_session=True)
        with self._lock:
            self._procs = [p for p in self._procs if p.poll() is None] + [proc]  # forget the reaped
        return proc

    def run(self, argv: Sequence[str], **kw) -> subprocess.CompletedProcess:
        """Run argv inside the namespace to its end (subprocess.run; checked, text output captured)."""
        kw = {"check": True, "capture_output": True, "text": True, "timeout": 30, **kw}
        return subprocess.run(self._enter(argv), **self._kw(kw))

    def contains(self, pid: int) -> bool:
        """Whether process `pid` is inside this sandbox's network namespace."""
        return self._identity() is not None and _ns_id(f"/proc/{pid}/ns/net") == self._identity()

    def pids(self) -> list[int]:
        """Every process inside the namespace (the holder too)."""
        ns = self._identity()
        return [int(d) for d in os.listdir("/proc") if d.isdigit() and ns and _ns_id(f"/proc/{d}/ns/net") == ns]

    def close(self) -> None:
        """Stop every process inside (SIGTERM, then SIGKILL after stop_timeout), then the holder."""
        atexit.unregister(self.close)
        alive = [p for p in self._procs if p.poll() is None]
        for proc in alive:  # the group is ours: an unreaped child's PID cannot have been reused
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for proc in alive:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        self._procs.clear()
        if self._fds:  # whatever is still inside left its group (a daemon): it is ours all the same
            for _ in range(50):
                stray = [pid for pid in self.pids() if pid != self.holder_pid]
                if not stray:
                    break
                for pid in stray:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.01)
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        if self._holder is not None:
            self._holder.stdin.close()  # EOF: the holder's cat exits
            try:
                self._holder.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                self._holder.wait()
            self._holder.stdout.close()
            self._holder.stderr.close()
            self._holder = None

    def _identity(self) -> tuple[int, int] | None:
        fd = self._fds.get("net")
        return None if fd is None else _ns_id(f"/proc/self/fd/{fd}")

    def _enter(self, argv: Sequence[str]) -> list[str]:
        """nsenter's command line that runs argv inside (nsenter joins first, then executes argv)."""
        if "net" not in self._fds:
            raise RuntimeError("the sandbox is not started (use it as a context manager)")
        options = [f"--{kind}=/proc/self/fd/{fd}" for kind, fd in self._fds.items()]
        if "user" in self._fds:
            options.append("--preserve-credentials")  # this user is root in the user namespace already
        return ["nsenter", *options, "--", *argv]

    def _kw(self, kw: dict) -> dict:
        """Popen's keywords with the pinned namespace fds passed on to nsenter (the program keeps them
        open: they name only the namespaces it is in)."""
        return {**kw, "pass_fds": (*kw.get("pass_fds", ()), *self._fds.values())}


def _proc_net_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: hex, in host byte order per 32-bit word."""
    raw = bytes.fromhex(host)
    return ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


# An IPv4 address, not part of a longer dotted number (a version such as 1.2.3.4.5 is not one).
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
# Something that may be an IPv6 address (ipaddress decides); `std::string` and 12:30:45 are not.
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")


def addresses_in(text: str) -> set[str]:
    """The IP addresses written in text (with or without a port, a prefix length or brackets)."""
    found = set()
    for candidate in _IPV4.findall(text) + _IPV6.findall(text):
        try:
            found.add(str(ipaddress.ip_address(candidate)))
        except ValueError:
            pass
    return found


def not_loopback(
    argv: Sequence[str],
    addresses: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    files: Iterable[str | os.PathLike] = (),
) -> list[str]:
    """The addresses a process is handed that are not loopback, sorted.

    Handed means: written in argv, in the environment given (the values that differ from the
    inherited os.environ), in the config files it reads, or named in `addresses`. The unspecified
    addresses 0.0.0.0 and :: count as not loopback: they mean every address of the machine.
    """
    named = [addresses_in(a) or _not_an_address(a) for a in addresses]
    texts = [*argv, *(Path(f).read_text(errors="replace") for f in files)]
    if env is not None:
        texts += [value for name, value in env.items() if os.environ.get(name) != value]
    found = set().union(*named, *(addresses_in(t) for t in texts))
    return sorted(a for a in found if not ipaddress.ip_address(a).is_loopback)


def _not_an_address(text: str) -> set[str]:
    raise ValueError(f"{text!r} names no IP address (the guard sees addresses, not host names)")


def start_process(
    argv: Sequence[str],
    addresses: Iterable[str] = (),
    *,
    sandbox: Sandbox | None = None,
    env: Mapping[str, str] | None = None,
    files: Iterable[str | os.PathLike] = (),
    **popen_kw,
) -> subprocess.Popen:
    """Start a traffic process: the one door through which the traffic tier starts every process.

    With a sandbox, argv starts inside it (and the sandbox stops it). Without one, argv starts only if
    every address it is handed (see `not_loopback`) is loopback; otherwise NetworkSafetyError is
    raised and nothing is started. The caller owns a process started outside a sandbox.
    """
    if sandbox is not None:
        return sandbox.popen(argv, env=env, **popen_kw)
    if outside := not_loopback(argv, addresses, env, files):
        raise NetworkSafetyError(
            f"refusing to start {Path(argv[0]).name}: it is handed {', '.join(outside)} (not loopback) "
            "and no network Sandbox was given; pod and Service addresses live only inside one"
        )
    return subprocess.Popen(argv, env=env, **popen_kw)
