"""The controller's one way to talk to the API server, on the `kubernetes` client alone.

Plain dicts in and out, and only the verbs the controller uses: get, list,
watch, a PUT of `/status` (which carries the resourceVersion read, so a
concurrent write makes the server answer 409) and a JSON merge patch of
`/status` (for the fault replace-parent-list). Every non-2xx answer is an
`ApiError` with the HTTP status; a 429 is retried for a while, as client-go does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .model import Resource

TOO_MANY_REQUESTS_RETRY = 10.0  # seconds a request answered 429 is retried


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


class Kube:
    """Dict-in, dict-out access to one cluster."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api = api_client

    # -- transport -------------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None, query: list | None = None,
                content_type: str = "application/json", timeout: Any = 30, stream: bool = False) -> Any:
        """One HTTP round trip; the decoded body, or the open response when `stream`.

        A 429 (the API server throttling, or a resource whose cache is still
        filling) was not acted on, so it is retried for a while."""
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

    # -- verbs -----------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", resource.path(namespace, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, resource: Resource) -> dict:
        """Every object of the resource, in all namespaces."""
        return self.request("GET", resource.path())

    def watch(self, resource: Resource, *, resource_version: str, timeout_seconds: int = 60) -> Iterator[dict]:
        """Yield watch events ({type, object}) of all namespaces until the server ends the watch."""
        query = [("watch", "true"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(max(1, timeout_seconds)))]
        resp = self.request("GET", resource.path(), query=query, stream=True, timeout=(5, timeout_seconds + 5))
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

    def replace_status(self, resource: Resource, obj: dict) -> dict:
        """PUT the object's status on /status; its resourceVersion makes a stale write a 409."""
        md = obj["metadata"]
        return self.request("PUT", resource.path(md.get("namespace"), md["name"], "status"), body=obj)

    def patch_status(self, resource: Resource, name: str, namespace: str | None, patch: dict) -> dict:
        """A JSON merge patch of /status (no resourceVersion: it never conflicts)."""
        return self.request("PATCH", resource.path(namespace, name, "status"), body=patch,
                            content_type="application/merge-patch+json")


def _decode(raw: Any) -> Any:
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return raw
