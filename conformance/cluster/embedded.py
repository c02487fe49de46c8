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
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import binary, pki

_CONTROLLERS = [
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "endpointslice-controller",
]


class ClusterError(RuntimeError):
    """The embedded cluster could not be started; the message says why."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _kubeconfig(server: str, ca: Path, user: str, cert: pki.KeyPair) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert.cert), "client-key": str(cert.key)}}],
        "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": user}}],
        "current-context": "embedded",
    }


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen
    log: Path


@dataclass
class EmbeddedCluster:
    """Start with `start()` or as a context manager; `kubeconfig` is then usable."""

    crd_paths: list[Path] = field(default_factory=list)
    startup_timeout: float = 60.0
    dir: Path | None = None
    kubeconfig: Path | None = None
    server: str | None = None
    _procs: list[_Proc] = field(default_factory=list)
    _lifeline: int | None = None  # write end of the pipe the components watch (see controlplane/lifeline.go)
    _lifeline_read: int | None = None
    _crd_names: list[str] = field(default_factory=list)
    _ssl: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "EmbeddedCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, progress=None) -> "EmbeddedCluster":
        kcp = binary.ensure(progress)
        self.dir = Path(tempfile.mkdtemp(prefix="ipc-cluster-"))
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
        certs = pki.generate(self.dir)
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
        deadline = time.monotonic() + self.startup_timeout
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
        ])

        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.load_cert_chain(str(certs.admin.cert), str(certs.admin.key))
        self._ssl = ctx
        self._wait(deadline, "kube-apiserver /readyz", lambda: self._get("/readyz") is not None)

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

        self.kubeconfig = self.dir / "kubeconfig"
        _write_yaml(self.kubeconfig, _kubeconfig(self.server, certs.ca, "admin", certs.admin))

        for path in self.crd_paths:
            self._install_crds(path)
        self._wait(deadline, "the default ServiceAccount",
                   lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None)
        for name in self._crd_names:
            self._wait(deadline, f"CRD {name} to be established", lambda n=name: self._established(n))

    def stop(self) -> None:
        """Stop every process (API server first, etcd last) and remove the directory."""
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                proc.popen.terminate()
                try:
                    proc.popen.wait(10)
                except subprocess.TimeoutExpired:
                    proc.popen.kill()
                    proc.popen.wait()
        self._procs.clear()
        for fd in (self._lifeline, self._lifeline_read):
            if fd is not None:
                os.close(fd)
        self._lifeline = self._lifeline_read = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        atexit.unregister(self.stop)

    @property
    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs]

    # -- helpers -----------------------------------------------------------

    def _spawn(self, kcp: Path, component: str, args: list[str]) -> None:
        assert self.dir is not None
        log = self.dir / f"{component}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [str(kcp), component, *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                pass_fds=(self._lifeline_read,),
                env={**os.environ, "KCP_LIFELINE_FD": str(self._lifeline_read)},
            )
        self._procs.append(_Proc(component, popen, log))

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

    def _install_crds(self, path: Path) -> None:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                self._request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                self._crd_names.append(doc["metadata"]["name"])

    def _established(self, name: str) -> bool:
        crd = self._get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conds = (crd or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


def _write_yaml(path: Path, data: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(data, f)
