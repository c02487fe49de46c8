"""Replace the InferencePool CRD on a live cluster, for meta-tests that reuse one
control plane across many suite runs (CRD mutants, API revisions)."""

from __future__ import annotations

import time

from conformance.kube import ApiError, Kube
from conformance.revisions import CRD_NAME
from conformance.wait import wait_for

CRD_API = "apiextensions.k8s.io/v1"
GROUP_VERSION = "/apis/inference.networking.x-k8s.io/v1alpha2"
INSTALL_TIMEOUT = 60.0


def _served(kube: Kube) -> bool:
    try:
        body = kube.request("GET", GROUP_VERSION, timeout=(5, 5))
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    return any(r.get("name") == "inferencepools" for r in (body or {}).get("resources") or [])


def _poll(what: str, ready, timeout: float = INSTALL_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def uninstall(kube: Kube) -> None:
    """Delete the InferencePool CRD and wait until neither it nor its API is served."""
    kube.delete(CRD_API, "CustomResourceDefinition", CRD_NAME)
    wait_for(kube, CRD_API, "CustomResourceDefinition", CRD_NAME, None, lambda o: o is None,
             timeout=INSTALL_TIMEOUT, what=f"CRD {CRD_NAME} to be deleted", expected="the CRD is gone")
    _poll(f"{GROUP_VERSION} to stop being served", lambda: not _served(kube))


def install(kube: Kube, crd: dict) -> ApiError | None:
    """Replace the InferencePool CRD with `crd`; the API server's refusal, or None once it serves it.

    A deleted and re-created CRD gets a new UID, and the API server builds its
    handler for the new UID from scratch: no request can meet the old schema.
    """
    uninstall(kube)
    body = {k: v for k, v in crd.items() if k != "status"}
    body["metadata"] = {"name": crd["metadata"]["name"], "annotations": crd["metadata"].get("annotations") or {}}
    try:
        kube.create(body)
    except ApiError as e:
        if e.status in (400, 422):
            return e
        raise
    wait_for(kube, CRD_API, "CustomResourceDefinition", CRD_NAME, None,
             lambda o: o is not None and any(c.get("type") == "Established" and c.get("status") == "True"
                                             for c in (o.get("status") or {}).get("conditions") or []),
             timeout=INSTALL_TIMEOUT, what=f"CRD {CRD_NAME} to be Established",
             expected="condition Established=True")
    _poll(f"{GROUP_VERSION} to be served", lambda: _served(kube))
    return None


