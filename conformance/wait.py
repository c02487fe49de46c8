"""The suite's one way to wait for the cluster to reach a state.

`wait_for` lists the object once and then watches it, so a change is seen as
soon as the API server sends it (no sleep, no poll interval). Transient API
errors (connection resets, 429, 5xx, an expired watch) are retried with
tenacity until the deadline. On timeout it raises `WaitTimeout`, which says
what was expected, what was last observed and how long it waited.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import tenacity
import urllib3
import yaml

from .kube import ApiError, Kube

Predicate = Callable[[dict | None], bool]
log = logging.getLogger("conformance.wait")  # shown with --conformance-debug
GUARD_INTERVAL = 2  # seconds a watch runs before a wait's guard is asked again


def trim(obj: dict | None) -> dict | None:
    """The object without the bookkeeping that hides what matters in a failure."""
    if not obj:
        return obj
    out = dict(obj)
    md = dict(out.get("metadata") or {})
    for key in ("managedFields", "selfLink"):
        md.pop(key, None)
    if md.get("annotations"):
        md["annotations"] = {k: v for k, v in md["annotations"].items()
                             if k != "kubectl.kubernetes.io/last-applied-configuration"}
    out["metadata"] = md
    return out


def to_yaml(obj) -> str:
    return yaml.safe_dump(trim(obj) if isinstance(obj, dict) else obj, sort_keys=False)


class WaitTimeout(AssertionError):
    def __init__(self, what: str, expected: str, last: dict | None, waited: float, problem: str = "") -> None:
        self.what, self.expected, self.last, self.waited = what, expected, last, waited
        observed = "the object does not exist" if last is None else to_yaml(last)
        detail = f"\nlast problem: {problem}" if problem else ""
        super().__init__(
            f"timed out after {waited:.1f}s waiting for {what}\n"
            f"expected: {expected}\n"
            f"last observed:\n{observed}{detail}"
        )


def transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiError):
        return exc.status in (0, 408, 410, 429) or exc.status >= 500
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


def retrying(deadline: float) -> tenacity.Retrying:
    """Retry transient API errors until `deadline` (a time.monotonic() value)."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(transient),
        stop=lambda rs: time.monotonic() >= deadline,
        wait=tenacity.wait_exponential(multiplier=0.05, max=1),
        reraise=True,
    )


def wait_for(kube: Kube, api_version: str, kind: str, name: str, namespace: str | None,
             predicate: Predicate, *, timeout: float, what: str, expected: str,
             guard: Callable[[], None] | None = None) -> dict | None:
    """Return the object (None if absent) as soon as `predicate` holds for it.

    `guard`, if given, is called every GUARD_INTERVAL seconds at most and raises
    when waiting on is pointless (the implementation that would act has exited).
    """
    start = time.monotonic()
    deadline = start + timeout
    log.debug("waiting up to %gs for %s: %s", timeout, what, expected)
    selector = f"metadata.name={name}"
    state: dict = {"last": None, "problem": ""}

    def once() -> dict | None | bool:
        if guard is not None:
            guard()
        listed = kube.list(api_version, kind, namespace, field_selector=selector)
        items = listed.get("items") or []
        state["last"] = items[0] if items else None
        if predicate(state["last"]):
            return state["last"]
        rv = listed["metadata"]["resourceVersion"]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        window = int(remaining) + 1 if guard is None else min(int(remaining) + 1, GUARD_INTERVAL)
        for event in kube.watch(api_version, kind, namespace, resource_version=rv,
                                field_selector=selector, timeout_seconds=window):
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "BOOKMARK":
                continue
            if etype == "ERROR":  # usually 410 Gone: start again from a fresh list
                raise ApiError(obj.get("code", 410), obj, "WATCH", kind)
            state["last"] = None if etype == "DELETED" else obj
            if predicate(state["last"]):
                return state["last"]
            if time.monotonic() >= deadline:
                return False
        return False if time.monotonic() >= deadline else True  # True: watch ended early, go again

    while True:
        try:
            for attempt in retrying(deadline):
                with attempt:
                    result = once()
        except Exception as e:  # a transient error outlived the deadline, or a real one
            if not transient(e):
                raise
            state["problem"] = str(e)
            result = False
        if result is True:
            continue
        if result is False:
            raise WaitTimeout(what, expected, state["last"], time.monotonic() - start, state["problem"])
        log.debug("%s: reached after %.2fs", what, time.monotonic() - start)
        return result
