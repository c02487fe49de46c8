"""Upstream's endpoint picker (EPP), built from the Go module proxy and run inside the network sandbox.

Why: the traffic rules (SPEC section 10, T1-T8) are about what a gateway does with the answers of an
endpoint picker: route to the pod it picks, report back which endpoint served, fail open or closed
when it is gone. Upstream's conformance suite judges gateways against upstream's own EPP, run with
two test plugins: one that picks the pods named in a request header, one that copies the endpoint
the gateway reports as served into a response header. This suite runs the same program, so a gateway
that passes here talks to the EPP users deploy, not to a stand-in of ours.

Which EPP: `sigs.k8s.io/gateway-api-inference-extension/cmd/epp` at v1.4.0, the newest release that
reads the pools of both APIs (`--pool-group`: inference.networking.k8s.io or
inference.networking.x-k8s.io; v1.5 reads GA pools only) and whose conformance suite ran the full EPP
with those plugins (v1.6 ships a lighter `cmd/lwepp` whose v1.6.0 refuses requests with a body through
a gateway that streams bodies; the fixes are not on the Go module proxy). The Go module in `epp/`
beside `conformance/` names that version, so the version is part of the repository: the module
declares `cmd/epp` as a tool and its go.sum pins every dependency.
`ensure()` builds it once (a few minutes) into the same cache as the embedded control plane, keyed by
the module's sources and this file's build recipe, under a file lock so that parallel workers build it
once; `python -m conformance build` builds it up front.

How it runs: `launch()` gives the command line, environment and plugins configuration for one
InferencePool, as upstream's conformance deployment runs it (pool name, namespace and group, ext_proc gRPC
on 9002, gRPC health on 9003, the plugins config), plus what a process outside a Pod needs:
`KUBECONFIG` (the EPP reads no --kubeconfig flag), `--secure-serving=false` (the gateway in the
sandbox speaks plain h2c to it), `--tracing=false` (no collector here) and
`--metrics-endpoint-auth=false` (so the suite can read its metrics without a token).
`EndpointPicker` starts it inside a `netns.Sandbox` through the guard and waits until its gRPC
health service answers SERVING (which it does once it has read its pool). The EPP reaches the API
server through a `bridge.ApiBridge` the caller keeps up in the same sandbox.
`probe.grpc_health()` asks a gRPC health service with the standard library alone (no grpcio).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cluster.binary import BuildError, cache_dir, cached_binary
from ..data import EPP as MODULE_DIR
from ..data import GO_MODULE_SUFFIXES
from .netns import start_process
from .probe import grpc_health

if TYPE_CHECKING:
    from .netns import Sandbox

BINARY_ENV = "IPC_EPP_BINARY"  # a prebuilt EPP to use instead of building one
UPSTREAM = "sigs.k8s.io/gateway-api-inference-extension"
PACKAGE = f"{UPSTREAM}/cmd/epp"

# The build recipe; it keys the cache together with the module's sources.
_LDFLAGS = "-s -w -X {upstream}/version.BuildRef={version}"
_BUILD_FLAGS = ("-trimpath", "-mod=readonly")

# Ports of upstream's conformance EPP (and the EPP's own defaults): ext_proc, gRPC health, Prometheus.
GRPC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090
# The service name upstream's probes ask the health server for (with leader election off, as here,
# the EPP answers every name alike).
HEALTH_SERVICE = "inference-extension"

# The request header upstream's test filter picks endpoints by (IP or IP:port, comma-separated), and
# the response header its test verifier writes the served endpoint to.
SELECTION_HEADER = "test-epp-endpoint-selection"
SERVED_HEADER = "x-conformance-test-served-endpoint"
# How the EPP tells the gateway its pick (a request header and dynamic metadata of that namespace), and
# the metadata key under which the gateway reports back the endpoint that served.
DESTINATION_HEADER = "x-gateway-destination-endpoint"
DESTINATION_METADATA_NAMESPACE = "envoy.lb"
SERVED_METADATA_KEY = "x-gateway-destination-endpoint-served"

# The plugins of upstream's conformance EPP: the header-driven filter as the one scheduling plugin of
# the one profile, and the verifier of the served endpoint. The EPP adds what is left out (a
# max-score picker, the single-profile handler, the metrics data source that polls each pod's
# /metrics). Without the selection header the filter keeps no endpoint, so the EPP refuses the
# request: upstream's tests always send it.
PLUGINS_CONFIG = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
    "kind": "EndpointPickerConfig",
    "plugins": [
        {"type": "header-based-testing-filter"},
        {"type": "destination-endpoint-served-verifier"},
    ],
    "schedulingProfiles": [
        {"name": "conformance-profile", "plugins": [{"pluginRef": "header-based-testing-filter"}]},
    ],
}


# -- building -------------------------------------------------------------------------------------

def version() -> str:
    """The upstream release the EPP module requires (e.g. v1.4.0)."""
    text = (MODULE_DIR / "go.mod").read_text()
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(UPSTREAM)}\s+(v\S+)", text, re.M)
    if not m:
        raise BuildError(f"{MODULE_DIR / 'go.mod'} does not require {UPSTREAM}")
    return m.group(1)


def _build_command(go: str, out: Path) -> list[str]:
    ldflags = _LDFLAGS.format(upstream=UPSTREAM, version=version())
    return [go, "build", "-v", *_BUILD_FLAGS, "-ldflags", ldflags, "-o", str(out), PACKAGE]


def _key() -> str:
    h = hashlib.sha256()
    for p in sorted(MODULE_DIR.glob("*")):
        if p.suffix in GO_MODULE_SUFFIXES:
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(" ".join(_build_command("go", Path("OUT"))).encode())
    return h.hexdigest()[:16]


def cached_path() -> Path:
    return cache_dir() / f"epp-{version()}-{_key()}"


def ensure(progress=None) -> Path:
    """The path of a usable EPP binary, built first if needed (`progress` gets one-line messages)."""
    return cached_binary(BINARY_ENV, cached_path(), ".epp-build.lock", _build, progress)


def _build(dest: Path, progress) -> None:
    go = shutil.which("go")
    if not go:
        raise BuildError("Go is not installed (no `go` on PATH); install Go 1.25 or newer to build the endpoint "
                         "picker of the traffic tier")
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    progress(f"building the endpoint picker ({PACKAGE}@{version()}) into {dest}; the first build takes a few "
             "minutes")
    started = time.monotonic()
    proc = subprocess.Popen(_build_command(go, tmp), cwd=MODULE_DIR, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    compiled = 0
    tail: list[str] = []
    done = threading.Event()

    def report() -> None:
        while not done.wait(15):
            progress(f"  ... {compiled} packages compiled, {time.monotonic() - started:.0f}s")

    threading.Thread(target=report, daemon=True).start()
    assert proc.stderr is not None
    for line in proc.stderr:
        compiled += 1
        tail = (tail + [line.rstrip()])[-20:]
    rc = proc.wait()
    done.set()
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"building the endpoint picker failed (go build exit {rc}):\n" + "\n".join(tail))
    tmp.rename(dest)
    # Older builds of this version (another recipe) are never used again; another version's may be, by
    # another checkout on this machine, while it runs: those stay.
    for old in dest.parent.glob(f"epp-{version()}-*"):
        if old != dest and not old.name.endswith(".lock"):
            old.unlink(missing_ok=True)
    progress(f"built the endpoint picker in {time.monotonic() - started:.0f}s")


# -- running --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Launch:
    """How to run the EPP for one pool: its command line, its environment, and its plugins config file."""

    argv: list[str]
    env: dict[str, str]
    config_file: Path
    kubeconfig: Path
    grpc_port: int
    health_port: int
    metrics_port: int


def launch(pool: str, namespace: str, kubeconfig: str | os.PathLike, workdir: str | os.PathLike, *,
           group: str = "inference.networking.k8s.io", binary: str | os.PathLike | None = None,
           grpc_port: int = GRPC_PORT, health_port: int = HEALTH_PORT, metrics_port: int = METRICS_PORT,
           verbosity: int = 4, secure_serving: bool = False,
           extra_args: tuple[str, ...] = ()) -> Launch:
    """The EPP's command line and environment for InferencePool `namespace/pool` of API group `group`,
    with the plugins config written to `workdir`.

    Several EPPs can share one sandbox when each has its own ports (upstream gives each its own Pod).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / f"epp-{namespace}-{pool}-plugins.yaml"
    config_file.write_text(json.dumps(PLUGINS_CONFIG, indent=2) + "\n")  # JSON is YAML: the EPP reads it
    argv = [
        str(binary or ensure()),
        "--pool-name", pool,
        "--pool-namespace", namespace,
        "--pool-group", group,
        "--grpc-port", str(grpc_port),
        "--grpc-health-port", str(health_port),
        "--metrics-port", str(metrics_port),
        "--config-file", str(config_file),
        "--v", str(verbosity),
        "--zap-encoder", "json",
        f"--secure-serving={str(secure_serving).lower()}",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        *extra_args,
    ]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return Launch(argv, env, config_file, Path(kubeconfig), grpc_port, health_port, metrics_port)


class EndpointPicker:
    """One EPP for one pool, running inside a sandbox; a context manager.

    The sandbox must already reach the API server named in the kubeconfig (`bridge.ApiBridge`).
    `start()` returns once the process runs; `wait_serving()` waits until its health service answers
    SERVING (its pool is read). Its log (JSON lines) goes to `log`.
    """

    def __init__(self, sandbox: Sandbox, pool: str, namespace: str, kubeconfig: str | os.PathLike,
                 workdir: str | os.PathLike, **launch_kw):
        self.sandbox = sandbox
        self.launch = launch(pool, namespace, kubeconfig, workdir, **launch_kw)
        self.log = Path(workdir) / f"epp-{namespace}-{pool}.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> EndpointPicker:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> EndpointPicker:
        with open(self.log, "ab") as out:
            self.process = start_process(self.launch.argv, sandbox=self.sandbox, env=self.launch.env,
                                         files=[self.launch.config_file, self.launch.kubeconfig],
                                         stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT)
        return self

    def health(self, timeout: float = 2.0) -> str:
        """The health service's answer now (SERVING, NOT_SERVING, ...), asked from inside the sandbox."""
        from .bridge import Bridge

        with Bridge.out_of(self.sandbox, self.launch.health_port) as b:
            return grpc_health("127.0.0.1", b.outside[1], HEALTH_SERVICE, timeout)

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Wait until the health service answers SERVING; raise RuntimeError with the log's tail if not."""
        from .bridge import Bridge

        deadline = time.monotonic() + timeout
        last = "no answer"
        with Bridge.out_of(self.sandbox, self.launch.health_port) as b:
            while time.monotonic() < deadline:
                if self.process is None or self.process.poll() is not None:
                    raise RuntimeError(f"the EPP exited (code {self.process and self.process.returncode}):\n"
                                       + self.tail())
                try:
                    last = grpc_health("127.0.0.1", b.outside[1], HEALTH_SERVICE, timeout=2)
                except OSError as e:
                    last = f"{type(e).__name__}: {e}"
                if last == "SERVING":
                    return
                time.sleep(0.2)
        raise RuntimeError(f"the EPP's health service did not answer SERVING within {timeout:.0f}s (last: {last}):\n"
                           + self.tail())

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the EPP by its PID (SIGTERM, then SIGKILL after timeout seconds)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
