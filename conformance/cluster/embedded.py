"""A real, throwaway Kubernetes control plane on the loopback interface.

One `EmbeddedCluster` is etcd, kube-apiserver and kube-controller-manager, each
its own process of the `kcp` binary, with credentials made for this cluster
alone in a private temporary directory. kube-apiserver serves TLS on 127.0.0.1
with anonymous access off; etcd accepts only clients with a certificate from
the cluster's CA. `stop()` (also run at exit and on SIGTERM) stops the
processes by PID and removes the directory.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from . import binary, scratch

if TYPE_CHECKING:
    from . import pki

_CONTROLLERS = [
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "endpointslice-controller",
]


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Gateway API CRDs are large
_CRDS_SEEN = "crds.json"  # in a template: the CRDs' names and collection paths

# Two of kube-apiserver's post-start hooks only create objects: the default RBAC
# roles and the system priority classes. Each sleeps a whole second before its
# first try (wait.Poll), which is a third of a start. On data from the
# template they have nothing left to create: readiness is /readyz without
# them, plus a look at one object of each (the hooks still run, and reconcile).
_BOOTSTRAPPED = {
    "poststarthook/rbac/bootstrap-roles": "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
    "poststarthook/scheduling/bootstrap-system-priority-classes":
        "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical",
}
_READYZ_BOOTSTRAPPED = "/readyz?" + "&".join(f"exclude={hook}" for hook in _BOOTSTRAPPED)

# kube-apiserver's garbage collector: a sixth of its CPU in a run of the suite, and a third of its
# start, where the heap grows through some fifteen collections. A throwaway cluster's live heap is
# about 100 MB: collecting only as the heap nears 384 MiB (instead of at twice the live heap) costs
# about 95 MiB more and saves 0.6-1.7 s of CPU in a run (docs/performance.md, "Garbage collection").
# GOGC or GOMEMLIMIT set in the environment win.
_APISERVER_GC = {"GOGC": "off", "GOMEMLIMIT": "384MiB"}


class ClusterError(RuntimeError):
    """The embedded cluster could not be started; the message says why."""


_PORT_ATTEMPTS = 3  # boots on new ports when one was taken meanwhile (see EmbeddedCluster._boot)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _kubeconfig(server: str, ca: Path, user: str, cert: pki.KeyPair | None = None, token: str | None = None) -> dict:
    credentials = {"token": token} if token else {"client-certificate": str(cert.cert), "client-key": str(cert.key)}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": user}}],
        "current-context": "embedded",
    }


@dataclass
class _Proc:
    name: str
    args: list[str]
    popen: subprocess.Popen
    log: Path


@dataclass
class EmbeddedCluster:
    """Start with `start()` or as a context manager; `kubeconfig` is then usable."""

    crd_paths: list[Path] = field(default_factory=list)
    apiserver_args: list[str] = field(default_factory=list)  # more kube-apiserver flags (e.g. an audit log)
    startup_timeout: float = 60.0
    dir: Path | None = None
    kubeconfig: Path | None = None
    server: str | None = None
    _procs: list[_Proc] = field(default_factory=list)
    _lifeline: int | None = None  # write end of the pipe the components watch (see controlplane/lifeline.go)
    _lifeline_read: int | None = None
    _crd_refs: list[tuple[str, str]] = field(default_factory=list)  # (CRD name, its collection's path)
    _ssl: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> EmbeddedCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, progress=None) -> EmbeddedCluster:
        kcp = binary.ensure(progress)
        self.dir = scratch.mkdtemp("cluster")
        self._lifeline_read, self._lifeline = os.pipe()
        atexit.register(self.stop)
        try:
            self._start(kcp)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, kcp: Path) -> None:
        assert self.dir is not None
        # Imported here: a process that only uses a cluster (a pytest-xdist worker) never makes keys,
        # and `cryptography` costs its start about 20 ms of CPU.
        from . import pki

        certs = pki.generate(self.dir)
        deadline = time.monotonic() + self.startup_timeout
        files = self._crd_files()
        template = _template_path(kcp, files)
        if (template / _CRDS_SEEN).is_file():
            # The CRDs as names and collection paths: parsing the large YAML again would cost more.
            self._crd_refs = [tuple(ref) for ref in json.loads((template / _CRDS_SEEN).read_text())]
            shutil.copytree(template / "etcd", self.dir / "etcd")
            self._boot(kcp, certs, deadline, bootstrapped=True)
        else:
            # First start of this binary with these CRDs: bootstrap from nothing,
            # keep the data as the template for the next starts, and boot again
            # from it, so that every cluster starts the same way.
            crds = [d for f in files for d in yaml.load_all(f.read_text(), Loader=_Loader)
                    if d and d.get("kind") == "CustomResourceDefinition"]
            self._crd_refs = [(d["metadata"]["name"], _collection(d)) for d in crds]
            self._boot(kcp, certs, deadline)
            for doc in crds:
                self._request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
            self._wait_ready(deadline)
            self._shut_down()
            _save_template(self.dir / "etcd", self._crd_refs, template)
            self._boot(kcp, certs, deadline, bootstrapped=True)
        self._wait_ready(deadline)

    def _boot(self, kcp: Path, certs: pki.ClusterPKI, deadline: float, bootstrapped: bool = False) -> None:
        """Start etcd on the data in dir/etcd, then kube-apiserver and kube-controller-manager.

        `bootstrapped`: the data already holds what the API server's bootstrap
        hooks create (see _BOOTSTRAPPED).

        The ports are found free just before the components bind them, and another process may take
        one in between (a cluster starting beside this one, or any outgoing connection, whose local
        port comes from the same range): a component that exits because its port is taken is started
        again, with the others, on new ports.
        """
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                return self._boot_on_free_ports(kcp, certs, deadline, bootstrapped)
            except ClusterError as e:
                if "address already in use" not in str(e) or attempt == _PORT_ATTEMPTS:
                    raise
                self._kill_all()

    def _boot_on_free_ports(self, kcp: Path, certs: pki.ClusterPKI, deadline: float, bootstrapped: bool) -> None:
        assert self.dir is not None
        etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        self._spawn(kcp, "etcd", [
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-url=https://127.0.0.1:{etcd_port}",
            f"--listen-peer-url=https://127.0.0.1:{peer_port}",
            f"--cert-file={certs.etcd_server.cert}",
            f"--key-file={certs.etcd_server.key}",
            f"--trusted-ca-file={certs.ca}",
        ])
        # kube-apiserver backs off for a second and more when etcd is not there yet.
        self._wait(deadline, "etcd to listen", lambda: _listening(etcd_port))
        self._spawn(kcp, "kube-apiserver", [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={self.dir / 'apiserver'}",
            f"--tls-cert-file={certs.apiserver.cert}",
            f"--tls-private-key-file={certs.apiserver.key}",
            f"--client-ca-file={certs.ca}",
            f"--token-auth-file={certs.tokens}",
            "--anonymous-auth=false",
            "--authorization-mode=RBAC",
            f"--etcd-servers=https://127.0.0.1:{etcd_port}",
            f"--etcd-cafile={certs.ca}",
            f"--etcd-certfile={certs.etcd_client.cert}",
            f"--etcd-keyfile={certs.etcd_client.key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certs.sa_pub}",
            f"--service-account-signing-key-file={certs.sa_key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            # A loopback advertise address cannot back the `kubernetes` Service endpoints.
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            *self.apiserver_args,
        ], env=_APISERVER_GC)
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.load_cert_chain(str(certs.admin.cert), str(certs.admin.key))
        self._ssl = ctx
        self.kubeconfig = self.dir / "kubeconfig"
        # The admin's clients (the suite, the implementation) present the token; the controller
        # manager keeps its certificate.
        _write_yaml(self.kubeconfig, _kubeconfig(self.server, certs.ca, "admin", token=certs.admin_token))
        if bootstrapped:
            self._wait(deadline, "kube-apiserver /readyz", lambda: self._get(_READYZ_BOOTSTRAPPED) is not None)
            for path in _BOOTSTRAPPED.values():
                if self._get(path) is None:
                    raise ClusterError(f"the etcd data template lacks {path}; delete {binary.cache_dir()} "
                                       "/etcd-templates and start again")
        else:
            self._wait(deadline, "kube-apiserver /readyz", lambda: self._get("/readyz") is not None)
        # Only now: the controller manager gives up (exits) when the API server is not healthy
        # within 10 s of its start, which a loaded machine can take; it needs a moment to start,
        # and the first namespace a client creates is what first needs it.
        cm_kubeconfig = self.dir / "controller-manager.kubeconfig"
        _write_yaml(cm_kubeconfig, _kubeconfig(self.server, certs.ca, "controller-manager", certs.controller_manager))
        self._spawn(kcp, "kube-controller-manager", [
            f"--kubeconfig={cm_kubeconfig}",
            "--secure-port=0",
            "--leader-elect=false",
            f"--controllers={','.join(_CONTROLLERS)}",
            f"--service-account-private-key-file={certs.sa_key}",
            f"--root-ca-file={certs.ca}",
            "--use-service-account-credentials=false",
        ])

    def _wait_ready(self, deadline: float) -> None:
        self._wait(deadline, "the default ServiceAccount",
                   lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None)
        if self._crd_refs:
            self._wait(deadline, "the CRDs to be established", self._established)
        # A custom resource answers 429 ("storage is (re)initializing") until its watch
        # cache is filled, which the first request for it starts. Clients retry a 429
        # (client-go does, and so does the suite); ask for each once now, on the side,
        # so that the caches fill while the caller gets going.
        paths = [f"{collection}?limit=1" for _, collection in self._crd_refs]
        threading.Thread(target=lambda: [self._get(p) for p in paths], daemon=True).start()

    def _shut_down(self) -> None:
        """Stop the components; etcd last and gracefully, so its data is whole."""
        for proc in reversed(self._procs):
            if proc.name != "etcd":
                proc.popen.kill()
            else:
                proc.popen.terminate()
            proc.popen.wait(30)
        self._procs.clear()

    def stop(self) -> None:
        """Stop every process and remove the directory.

        The cluster's data goes with the directory, so the components are
        killed outright rather than asked to shut down (kube-apiserver's
        graceful shutdown alone takes about a second): none of them has
        anything left to write that anyone would read.
        """
        self._kill_all()
        for fd in (self._lifeline, self._lifeline_read):
            if fd is not None:
                os.close(fd)
        self._lifeline = self._lifeline_read = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        atexit.unregister(self.stop)

    def _kill_all(self) -> None:
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                proc.popen.kill()
        for proc in self._procs:
            proc.popen.wait()
        self._procs.clear()

    @property
    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs]

    # -- fault injection (for the suite's robustness tests) ------------------

    def kill(self, component: str) -> None:
        """SIGKILL one component, as a crash would; `restart` brings it back."""
        proc = self._proc(component)
        proc.popen.kill()
        proc.popen.wait()

    def restart(self, component: str) -> None:
        """Start a stopped component again with its first arguments, and wait until it serves."""
        proc = self._proc(component)
        assert proc.popen.poll() is not None, f"{component} is still running"
        self._procs.remove(proc)
        self._spawn(binary.ensure(), component, proc.args)
        if component == "kube-apiserver":
            self._wait(time.monotonic() + self.startup_timeout, "kube-apiserver /readyz",
                       lambda: self._get("/readyz") is not None)

    def _proc(self, component: str) -> _Proc:
        return next(p for p in self._procs if p.name == component)

    # -- helpers -----------------------------------------------------------

    def _spawn(self, kcp: Path, component: str, args: list[str], env: dict[str, str] | None = None) -> None:
        """Start a component; `env`: its defaults, under what the environment sets."""
        assert self.dir is not None
        log = self.dir / f"{component}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                [str(kcp), component, *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                pass_fds=(self._lifeline_read,),
                env={**(env or {}), **os.environ, "KCP_LIFELINE_FD": str(self._lifeline_read)},
            )
        self._procs.append(_Proc(component, args, popen, log))

    def _check_alive(self) -> None:
        for p in self._procs:
            if p.popen.poll() is not None:
                tail = p.log.read_text(errors="replace").strip().splitlines()[-15:]
                raise ClusterError(f"{p.name} exited with code {p.popen.returncode}:\n" + "\n".join(tail))

    def _wait(self, deadline: float, what: str, ready) -> None:
        while True:
            self._check_alive()
            if ready():
                return
            if time.monotonic() > deadline:
                tails = "".join(f"\n--- {p.name} (last lines) ---\n" + "\n".join(
                    p.log.read_text(errors="replace").strip().splitlines()[-8:]) for p in self._procs)
                raise ClusterError(f"timed out after {self.startup_timeout:.0f}s waiting for {what}{tails}")
            time.sleep(0.02)

    def _request(self, method: str, path: str, body: dict | None = None):
        req = urllib.request.Request(
            self.server + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, context=self._ssl, timeout=5) as resp:
            raw = resp.read()
            return json.loads(raw) if raw.startswith(b"{") else raw

    def _get(self, path: str):
        try:
            return self._request("GET", path)
        except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
            return None

    def _crd_files(self) -> list[Path]:
        return [f for path in self.crd_paths for f in (sorted(path.glob("*.yaml")) if path.is_dir() else [path])]

    def _established(self) -> bool:
        """Every CRD of ours is Established (one list: the Gateway API CRDs are large)."""
        listed = self._get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        established = {c["metadata"]["name"] for c in (listed or {}).get("items", [])
                       if any(x["type"] == "Established" and x["status"] == "True"
                              for x in (c.get("status") or {}).get("conditions") or [])}
        return all(name in established for name, _ in self._crd_refs)


def _collection(crd: dict) -> str:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served"))
    return f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"


def _template_path(kcp: Path, crd_files: list[Path]) -> Path:
    """Where the etcd data of a freshly bootstrapped cluster of this binary, with these CRDs, is kept."""
    digest = hashlib.sha256(kcp.name.encode())
    for f in crd_files:
        digest.update(f.read_bytes())
    return binary.cache_dir() / "etcd-templates" / f"{kcp.name}-{digest.hexdigest()[:16]}"


def _save_template(data: Path, crd_refs: list[tuple[str, str]], template: Path) -> None:
    """Copy `data` (and what the CRDs are) to `template`, whole or not at all: other starts may
    be doing the same."""
    template.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=template.parent))
    try:
        shutil.copytree(data, tmp / "template" / "etcd")
        (tmp / "template" / _CRDS_SEEN).write_text(json.dumps(crd_refs))
        os.rename(tmp / "template", template)
    except OSError:
        if not template.is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    binary_name = template.name.rsplit("-", 1)[0]
    for old in template.parent.iterdir():  # templates of other binaries, or of older layouts, are never used
        if not old.name.startswith(".tmp-") and (not old.name.startswith(binary_name + "-")
                                                 or not (old / _CRDS_SEEN).is_file()):
            shutil.rmtree(old, ignore_errors=True)


def _write_yaml(path: Path, data: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(data, f)
