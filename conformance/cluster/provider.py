"""The suite's clusters as pytest-kubernetes cluster managers.

`EmbeddedManager` is a pytest-kubernetes provider for our own control plane.
`UserClusterManager` wraps pytest-kubernetes' external provider for a user's
cluster. Two hazards of that library are contained here (docs/clusters.md):

* its teardown deletes the kubeconfig file it was given, so it only ever gets
  a private copy of the user's kubeconfig, reduced to the chosen context;
* its readiness check shells out to `kubectl`, which may not be installed, so
  readiness is checked over the API instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml
from pytest_kubernetes.providers.base import AClusterManager
from pytest_kubernetes.providers.external import ExternalManagerBase

from . import scratch
from .embedded import EmbeddedCluster

_PATH_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


class KubeconfigError(RuntimeError):
    """The user's kubeconfig or context cannot be used; one line saying why."""


def private_kubeconfig(paths: str, context: str | None) -> tuple[Path, str, str]:
    """Copy the chosen context of a kubeconfig (a KUBECONFIG-style path list) into a private file.

    Returns (copy, context name, server URL). Relative file references are made
    absolute so the copy works from anywhere; nothing else is changed.
    """
    merged: dict[str, dict] = {"clusters": {}, "users": {}, "contexts": {}}
    current = None
    files = [p for p in paths.split(os.pathsep) if p]
    for f in files:
        p = Path(f).expanduser()
        if not p.is_file():
            raise KubeconfigError(f"kubeconfig {p} does not exist; pass --kubeconfig with a readable file")
        try:
            doc = yaml.safe_load(p.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise KubeconfigError(f"kubeconfig {p} cannot be read as YAML ({type(e).__name__}); fix the file or pass "
                                  "another --kubeconfig") from None
        if not isinstance(doc, dict):
            raise KubeconfigError(f"kubeconfig {p} is not a kubeconfig mapping")
        current = current or doc.get("current-context")
        for kind in merged:
            for entry in doc.get(kind) or []:
                body = entry.get(kind[:-1]) or {}
                for key in _PATH_KEYS:
                    if body.get(key) and not os.path.isabs(body[key]):
                        body[key] = str((p.parent / body[key]).resolve())
                merged[kind].setdefault(entry.get("name"), body)  # first file wins, as kubectl does
    name = context or current
    if not name:
        raise KubeconfigError("the kubeconfig has no current-context; pass --context NAME")
    ctx = merged["contexts"].get(name)
    if ctx is None:
        known = ", ".join(sorted(merged["contexts"])) or "none"
        raise KubeconfigError(f"context {name!r} is not in the kubeconfig (known: {known}); pass --context with one "
                              "of them")
    cluster = merged["clusters"].get(ctx.get("cluster"))
    user = merged["users"].get(ctx.get("user"), {})
    if not cluster or not cluster.get("server"):
        raise KubeconfigError(f"context {name!r} names cluster {ctx.get('cluster')!r}, which has no server in the "
                              "kubeconfig")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": ctx["cluster"], "cluster": cluster}],
        "users": [{"name": ctx.get("user", ""), "user": user}],
        "contexts": [{"name": name, "context": ctx}],
        "current-context": name,
    }
    copy = scratch.mkdtemp("kubeconfig") / "kubeconfig.yaml"  # in a directory of its own, 0700
    with os.fdopen(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        yaml.safe_dump(doc, out)
    return copy, name, cluster["server"]


class EmbeddedManager(AClusterManager):
    """pytest-kubernetes provider that runs our embedded control plane."""

    crd_paths: list[Path] = []

    def __init__(self, cluster_name=None, provider_config=None, kubeconfig=None) -> None:
        self.cluster = EmbeddedCluster(crd_paths=list(self.crd_paths))
        super().__init__(cluster_name, provider_config, None)

    @classmethod
    def get_binary_name(cls) -> str:
        return "kcp"

    def _ensure_executable(self) -> None:
        pass  # built on first use by EmbeddedCluster.start()

    def _on_create(self, cluster_options, **kwargs) -> None:
        self.cluster.start(kwargs.get("progress"))
        self._cluster_options.kubeconfig_path = self.cluster.kubeconfig

    def create(self, cluster_options=None, timeout: int = 60, **kwargs) -> None:
        # The base class probes an existing cluster with kubectl first; ours
        # never exists before create(), so go straight to starting it.
        self._on_create(self._cluster_options, **kwargs)

    def ready(self, timeout: int = 20) -> bool:
        return self.cluster.kubeconfig is not None and all(p is not None for p in self.cluster.pids)

    def _on_delete(self) -> None:
        self.cluster.stop()

    def delete(self) -> None:
        # The kubeconfig lives in the cluster's own directory, removed by stop().
        self._on_delete()
        self._cluster_options.kubeconfig_path = None

    def load_image(self, image: str) -> None:
        raise NotImplementedError("the embedded control plane runs no nodes, so it has no images")


class UserClusterManager(ExternalManagerBase):
    """pytest-kubernetes external provider over a private copy of the user's kubeconfig."""

    def __init__(self, paths: str, context: str | None) -> None:
        copy, self.context_name, self.server = private_kubeconfig(paths, context)
        super().__init__(cluster_name="user", kubeconfig=copy)
        self._created = True  # so delete() removes our copy, never the user's file

    def create(self, cluster_options=None, timeout: int = 20, **kwargs) -> None:
        pass  # the user's cluster already exists; reachability is checked by the suite

    def ready(self, timeout: int = 20) -> bool:
        return True

    def delete(self) -> None:
        # The base class also sleeps a second "for the cluster" here; ours is the user's and stays.
        if self.kubeconfig is not None:
            shutil.rmtree(self.kubeconfig.parent, ignore_errors=True)  # the directory private_kubeconfig made
        self._cluster_options.kubeconfig_path = None
        self._kubeconfig = None
