"""The suite's one way to talk to the API server.

A thin layer over `kubernetes.client.ApiClient.call_api` that works on plain
dicts and knows the few resources the suite touches (no discovery round
trips). Every write goes through `create`, `apply`, `patch`, `replace` or
`delete` (a read-modify-write through `write_latest`); every failure is an
`ApiError` carrying the HTTP status and the `details.causes` of the Status the
server returned. Independent requests can be sent together (`concurrently`): a
test's objects are deleted at once rather than one round trip after another.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

FIELD_MANAGER = "inferencepool-conformance"
TOO_MANY_REQUESTS_RETRY = 10.0  # seconds a request answered 429 is retried
IN_FLIGHT = 8  # requests sent together by `concurrently` (the client keeps 10 connections per server)
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


INFERENCE_GROUP = "inference.networking.x-k8s.io"
INFERENCE_GA_GROUP = "inference.networking.k8s.io"
GATEWAY_GROUP = "gateway.networking.k8s.io"

RESOURCES: dict[tuple[str, str], Resource] = {
    (f"{INFERENCE_GROUP}/v1alpha2", "InferencePool"): Resource(INFERENCE_GROUP, "v1alpha2", "inferencepools"),
    (f"{INFERENCE_GA_GROUP}/v1", "InferencePool"): Resource(INFERENCE_GA_GROUP, "v1", "inferencepools"),
    (f"{GATEWAY_GROUP}/v1", "GatewayClass"): Resource(GATEWAY_GROUP, "v1", "gatewayclasses", namespaced=False),
    (f"{GATEWAY_GROUP}/v1", "Gateway"): Resource(GATEWAY_GROUP, "v1", "gateways"),
    (f"{GATEWAY_GROUP}/v1", "HTTPRoute"): Resource(GATEWAY_GROUP, "v1", "httproutes"),
    ("v1", "Namespace"): Resource("", "v1", "namespaces", namespaced=False),
    ("v1", "Service"): Resource("", "v1", "services"),
    ("v1", "Pod"): Resource("", "v1", "pods"),
    ("v1", "Event"): Resource("", "v1", "events"),
    ("v1", "ServiceAccount"): Resource("", "v1", "serviceaccounts"),
    ("v1", "ConfigMap"): Resource("", "v1", "configmaps"),
    ("rbac.authorization.k8s.io/v1", "Role"): Resource("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Resource("rbac.authorization.k8s.io", "v1", "rolebindings"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): Resource(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False
    ),
}


def resource_of(obj_or_api_version: dict | str, kind: str | None = None) -> Resource:
    if isinstance(obj_or_api_version, dict):
        api_version, kind = obj_or_api_version["apiVersion"], obj_or_api_version["kind"]
    else:
        api_version = obj_or_api_version
    try:
        return RESOURCES[(api_version, kind)]
    except KeyError:
        raise KeyError(f"the suite does not know the resource {api_version} {kind}") from None


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, body: Any, method: str, path: str) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.method, self.path = method, path
        super().__init__(f"{method} {path}: HTTP {status}: {self.body.get('message', body)}")

    @property
    def reason(self) -> str:
        return self.body.get("reason", "")

    @property
    def causes(self) -> list[dict]:
        return (self.body.get("details") or {}).get("causes") or []


# The kubernetes client runs a kubeconfig's credential refresh before every
# request. For a bearer token that re-applies the whole kubeconfig user and
# cluster (reading the proxy settings from the environment again): some
# 45 µs a request. The loader renews a token 5 minutes before it expires, so
# once a second renews it as surely.
REFRESH_INTERVAL = 1.0


def _refresh_sparingly(configuration: k8s.Configuration) -> None:
    """Run `configuration`'s credential refresh at most once every REFRESH_INTERVAL seconds."""
    refresh = configuration.refresh_api_key_hook
    if refresh is None or getattr(refresh, "sparing", False):
        return
    last = [float("-inf")]

    def sparing(conf: k8s.Configuration) -> None:
        nonlocal refresh
        now = time.monotonic()
        if now - last[0] < REFRESH_INTERVAL:
            return
        last[0] = now
        refresh(conf)
        # The kubeconfig loader's refresh installs itself again: keep it behind this one.
        if conf.refresh_api_key_hook is not sparing:
            refresh, conf.refresh_api_key_hook = conf.refresh_api_key_hook or refresh, sparing
    sparing.sparing = True  # type: ignore[attr-defined]
    configuration.refresh_api_key_hook = sparing


class Kube:
    """Dict-in, dict-out access to one cluster."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api = api_client
        _refresh_sparingly(api_client.configuration)
        # Namespaced objects this client created, per namespace, oldest first:
        # cleanup deletes exactly these, newest first.
        self.created: dict[str, list[tuple[str, str, str]]] = {}
        self._threads: ThreadPoolExecutor | None = None

    def _record(self, obj: dict) -> None:
        md = obj.get("metadata") or {}
        if md.get("namespace"):
            ref = (obj["apiVersion"], obj["kind"], md["name"])
            entries = self.created.setdefault(md["namespace"], [])
            if ref not in entries:
                entries.append(ref)

    # -- transport -----------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None, query: list | None = None,
                content_type: str = "application/json", timeout: Any = 30,
                stream: bool = False) -> Any:
        """One HTTP round trip; the decoded body, or the open response when `stream`.

        A 429 (the API server throttling, or a resource whose cache is still
        filling) was not acted on, so it is retried for a while, as client-go does.
        """
        deadline = time.monotonic() + TOO_MANY_REQUESTS_RETRY
        delay = 0.05
        while True:
            try:
                return self._request_once(method, path, body, query, content_type, timeout, stream)
            except ApiError as e:
                if e.status != 429 or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _request_once(self, method: str, path: str, body: Any, query: list | None, content_type: str,
                      timeout: Any, stream: bool) -> Any:
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, query_params=list(query or []),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"],
        )
        try:
            resp = self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=timeout).response
        except ApiException as e:  # raised by the client only for TLS failures
            raise ApiError(e.status or 0, {"message": str(e.reason)}, method, path) from None
        if not 200 <= resp.status < 300:
            data = resp.data
            resp.release_conn()
            raise ApiError(resp.status, _decode(data), method, path)
        if stream:
            return resp
        data = resp.data
        resp.release_conn()
        return _decode(data)

    def concurrently(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`fn` of each item, the requests in flight together; the results in the items' order.

        For independent requests only (their order is not kept). Every call
        has ended by the time this returns or raises; the first failure (in
        the items' order) is raised.
        """
        items = list(items)
        if len(items) <= 1:
            return [fn(item) for item in items]
        if self._threads is None:
            self._threads = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="kube")
        futures = [self._threads.submit(fn, item) for item in items]
        results, failure = [], None
        for future in futures:
            try:
                results.append(future.result())
            except Exception as e:
                failure = failure or e
        if failure is not None:
            raise failure
        return results

    # -- verbs ---------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", resource_of(api_version, kind).path(namespace, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def get_as_of(self, api_version: str, kind: str, name: str, namespace: str | None,
                  resource_version: str) -> dict | None:
        """The object read back exactly as it was stored at `resource_version`.

        It is decoded and defaulted like any read, but nothing written after that
        version (a controller's status write, say) can show in it.
        """
        listed = self.list(api_version, kind, namespace, field_selector=f"metadata.name={name}",
                           exact_resource_version=resource_version)
        items = listed.get("items") or []
        if not items:
            return None
        # A list's items carry no apiVersion/kind of their own.
        return {"apiVersion": api_version, "kind": kind, **items[0]}

    def list(self, api_version: str, kind: str, namespace: str | None = None, *,
             label_selector: str | None = None, field_selector: str | None = None,
             exact_resource_version: str | None = None) -> dict:
        """A list; with `exact_resource_version`, the objects exactly as they were at that version."""
        query = []
        if exact_resource_version:
            query += [("resourceVersion", exact_resource_version), ("resourceVersionMatch", "Exact")]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        return self.request("GET", resource_of(api_version, kind).path(namespace), query=query)

    def create(self, obj: dict, *, dry_run: bool = False, field_validation: str | None = None) -> dict:
        ns = obj.get("metadata", {}).get("namespace")
        out = self.request("POST", resource_of(obj).path(ns), body=obj,
                           query=_write_query(dry_run, field_validation))
        if not dry_run:
            self._record(out)
        return out

    def replace(self, obj: dict, *, subresource: str | None = None, dry_run: bool = False,
                field_validation: str | None = None) -> dict:
        md = obj["metadata"]
        return self.request("PUT", resource_of(obj).path(md.get("namespace"), md["name"], subresource),
                            body=obj, query=_write_query(dry_run, field_validation))

    def write_latest(self, api_version: str, kind: str, name: str, namespace: str | None,
                     write: Callable[[dict], R], *, current: dict | None = None,
                     attempts: int = 10) -> tuple[dict, R]:
        """(the object written against, `write(a copy of it)`): a read-modify-write against the
        version last seen.

        A controller may write the object at any moment; a write that loses
        that race (409) reads again and is retried, so what the write replaced
        is exactly what was read, and another writer's timing never fails it.
        `current` is the object as the caller last saw it (a create's answer,
        say): the first write is tried against it, and the object is read only
        when that write loses.
        """
        for _ in range(attempts):
            if current is None:
                current = self.get(api_version, kind, name, namespace)
                if current is None:
                    raise ApiError(404, {"message": f"{kind} {namespace}/{name} is gone"}, "GET",
                                   resource_of(api_version, kind).path(namespace, name))
            try:
                return current, write(copy.deepcopy(current))
            except ApiError as e:
                if e.status != 409:
                    raise
                lost, current = e, None
        raise ApiError(409, {"message": f"every write lost to another writer of {kind} {namespace}/{name} "
                                        f"{attempts} times in a row: {lost.body.get('message')}"},
                       lost.method, lost.path)

    def apply(self, obj: dict, *, dry_run: bool = False, field_manager: str = FIELD_MANAGER,
              subresource: str | None = None, force: bool = True) -> dict:
        """Server-side apply: the suite's one way to create-or-update a manifest."""
        md = obj["metadata"]
        query = _write_query(dry_run, None) + [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        out = self.request("PATCH", resource_of(obj).path(md.get("namespace"), md["name"], subresource),
                           body=obj, query=query, content_type="application/apply-patch+yaml")
        if not dry_run and subresource is None:
            self._record(out)
        return out

    def patch(self, api_version: str, kind: str, name: str, patch: dict, *, namespace: str | None = None,
              subresource: str | None = None, dry_run: bool = False) -> dict:
        """JSON merge patch (custom resources do not take strategic merge)."""
        return self.request("PATCH", resource_of(api_version, kind).path(namespace, name, subresource),
                            body=patch, query=_write_query(dry_run, None),
                            content_type="application/merge-patch+json")

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """Delete (dependents in the background). The server's answer: the object as deleted (its
        resourceVersion that of the deletion) or as marked for deletion, or a Status; None when it
        was already gone."""
        try:
            return self.request("DELETE", resource_of(api_version, kind).path(namespace, name),
                                body={"propagationPolicy": "Background"})
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    @staticmethod
    def removed(answer: dict | None) -> bool:
        """Whether a `delete`'s answer says the object is gone already: it was not there, or the
        server removed it at once (a Status of success, or the object as deleted). An object whose
        deletion waits (finalizers pending, or a grace period running) is still there.

        An object deleted at once may carry a deletion timestamp all the same: kinds with a grace
        period (a Pod not bound to a node, say) are marked with a period of 0 and then removed."""
        if answer is None:
            return True
        if answer.get("kind") == "Status":
            return answer.get("status") == "Success"
        md = answer.get("metadata") or {}
        return not md.get("finalizers") and not md.get("deletionGracePeriodSeconds")

    def watch(self, api_version: str, kind: str, namespace: str | None, *, resource_version: str,
              field_selector: str | None = None, timeout_seconds: int = 60) -> Iterator[dict]:
        """Yield watch events ({type, object}) until the server ends the watch."""
        query = [("watch", "true"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(max(1, timeout_seconds)))]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        resp: urllib3.HTTPResponse = self.request(
            "GET", resource_of(api_version, kind).path(namespace), query=query,
            stream=True, timeout=(5, timeout_seconds + 5))
        try:
            buf = b""
            for chunk in resp.stream(amt=None, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()

    def server_version(self) -> dict:
        return self.request("GET", "/version", timeout=10)


def _write_query(dry_run: bool, field_validation: str | None) -> list:
    q = []
    if dry_run:
        q.append(("dryRun", "All"))
    if field_validation:
        q.append(("fieldValidation", field_validation))
    return q


def _decode(raw: Any) -> Any:
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return raw
