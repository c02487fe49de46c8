"""Find or build `kcp`, the control-plane binary of the embedded cluster.

The binary is built from the Go module in `controlplane/` (found by
`conformance.data`: a checkout's, or an installed package's copy) and cached
under the user's cache directory, keyed by a hash of that module's sources: a
fresh clone, or an installed package with the same sources, reuses an earlier
build, and a source change builds anew. Go's own build and module caches make
a rebuild cheap after the first one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..data import CONTROLPLANE as MODULE_DIR
from ..data import CONTROLPLANE_SUFFIXES

BINARY_ENV = "IPC_KCP_BINARY"


class BuildError(RuntimeError):
    """The control plane cannot be built; the message is one line saying why and what to do."""


def kubernetes_version() -> str:
    """The k8s.io/kubernetes version required by the control-plane module."""
    m = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", (MODULE_DIR / "go.mod").read_text(), re.M)
    if not m:
        raise BuildError(f"{MODULE_DIR / 'go.mod'} does not require k8s.io/kubernetes")
    return m.group(1)


def _source_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(MODULE_DIR.glob("*")):
        if p.suffix in CONTROLPLANE_SUFFIXES:
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferencepool-conformance"


def cached_path() -> Path:
    return cache_dir() / f"kcp-{kubernetes_version()}-{_source_hash()}"


def ensure(progress=None) -> Path:
    """Return the path of a usable kcp binary, building it if needed.

    `progress` receives one-line messages while a build runs.
    """
    return cached_binary(BINARY_ENV, cached_path(), ".build.lock", _build, progress)


def cached_binary(env: str, path: Path, lock_name: str, build: Callable[[Path, Callable[[str], None]], None],
                  progress: Callable[[str], None] | None = None) -> Path:
    """The executable $`env` names, else `path`, built first by `build(path, progress)` when missing.

    Several xdist workers may ask at once: one builds, the others wait on the lock file `lock_name`
    beside `path` (one per binary, so that one build does not wait for another)."""
    override = os.environ.get(env)
    if override:
        if not os.access(override, os.X_OK):
            raise BuildError(f"{env}={override} is not an executable file; unset it or build with "
                             "`python -m conformance build`")
        return Path(override)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / lock_name, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            build(path, progress or (lambda msg: print(msg, file=sys.stderr, flush=True)))
    return path


def _build(dest: Path, progress) -> None:
    go = shutil.which("go")
    if not go:
        raise BuildError("Go is not installed (no `go` on PATH); install Go 1.25 or newer to build the embedded "
                         "control plane, or run against your own cluster with --kubeconfig")
    version = kubernetes_version()
    minor = version.split(".")[1]
    pkg = "k8s.io/component-base/version"
    ldflags = " ".join([
        "-s -w",
        f"-X {pkg}.gitVersion={version}",
        f"-X {pkg}.gitMajor=1",
        f"-X {pkg}.gitMinor={minor}",
        f"-X {pkg}.gitTreeState=clean",
    ])
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    cmd = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), "."]
    progress(f"building the embedded control plane (Kubernetes {version}) into {dest}; the first build takes "
             "several minutes")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=MODULE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    compiled = 0
    tail: list[str] = []
    done = threading.Event()

    def report() -> None:
        while not done.wait(15):
            progress(f"  ... {compiled} packages compiled, {time.monotonic() - started:.0f}s")

    ticker = threading.Thread(target=report, daemon=True)
    ticker.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        compiled += 1
        tail = (tail + [line.rstrip()])[-20:]
    rc = proc.wait()
    done.set()
    if rc != 0:
        tmp.unlink(missing_ok=True)
        detail = "\n".join(tail)
        raise BuildError(f"building the control plane failed (go build exit {rc}):\n{detail}")
    tmp.rename(dest)
    for old in dest.parent.glob("kcp-*"):  # builds of other sources are never used again
        if old != dest:
            old.unlink(missing_ok=True)
    progress(f"built the embedded control plane in {time.monotonic() - started:.0f}s")
