"""Replace an InferencePool CRD on a live cluster, for meta-tests that reuse one
control plane across many suite runs (CRD mutants, API revisions).

Each API has a CRD of its own (`inferencepools.inference.networking.x-k8s.io`
for v1alpha2, `inferencepools.inference.networking.k8s.io` for v1): `install`
replaces the one the given CRD is (by its group), `uninstall` the one of the
API named (v1alpha2 unless told otherwise).
"""

from __future__ import annotations

import time

from conformance.kube import ApiError, Kube
from conformance.revisions import APIS, Api, api_of_crd
from conformance.wait import wait_for

CRD_API = "apiextensions.k8s.io/v1"
INSTALL_TIMEOUT = 60.0


def _group_version(api: Api) -> str:
    return f"/apis/{api.api_version}"


def _served(kube: Kube, api: Api) -> bool:
    try:
        body = kube.request("GET", _group_version(api), timeout=(5, 5))
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


def uninstall(kube: Kube, api: Api | str = "v1alpha2") -> None:
    """Delete the InferencePool CRD of `api` and wait until neither it nor its API is served."""
    api = APIS[api] if isinstance(api, str) else api
    kube.delete(CRD_API, "CustomResourceDefinition", api.crd_name)
    wait_for(kube, CRD_API, "CustomResourceDefinition", api.crd_name, None, lambda o: o is None,
             timeout=INSTALL_TIMEOUT, what=f"CRD {api.crd_name} to be deleted", expected="the CRD is gone")
    _poll(f"{_group_version(api)} to stop being served", lambda: not _served(kube, api))


def install(kube: Kube, crd: dict) -> ApiError | None:
    """Replace the InferencePool CRD of `crd`'s API with `crd`; the API server's refusal, or None once it
    serves it.

    A deleted and re-created CRD gets a new UID, and the API server builds its
    handler for the new UID from scratch: no request can meet the old schema.
    """
    api = api_of_crd(crd)
    if api is None:
        raise ValueError(f"{crd.get('metadata', {}).get('name')} is no InferencePool CRD of a known API")
    uninstall(kube, api)
    body = {k: v for k, v in crd.items() if k != "status"}
    body["metadata"] = {"name": crd["metadata"]["name"], "annotations": crd["metadata"].get("annotations") or {}}
    try:
        kube.create(body)
    except ApiError as e:
        if e.status in (400, 422):
            return e
        raise
    wait_for(kube, CRD_API, "CustomResourceDefinition", api.crd_name, None,
             lambda o: o is not None and any(c.get("type") == "Established" and c.get("status") == "True"
                                             for c in (o.get("status") or {}).get("conditions") or []),
             timeout=INSTALL_TIMEOUT, what=f"CRD {api.crd_name} to be Established",
             expected="condition Established=True")
    _poll(f"{_group_version(api)} to be served", lambda: _served(kube, api))
    return None
