"""The suite's one way to wait for the cluster to reach a state.

`wait_for` reads the object once and then watches it from the version read,
so a change is seen as soon as the API server sends it (no sleep, no poll
interval). The read is a GET, which the API server answers from etcd at once;
a list without a version is answered from its watch cache once that cache has
caught up, which for a resource nobody wrote lately means waiting for etcd's
next progress report (up to 100 ms each time). Only an absent object, whose
GET gives no version to watch from, is listed, and so is an object whose
version has become too old to watch from. Transient API
errors (connection resets, 429, 5xx, an expired watch) are retried with
tenacity until the deadline. On timeout it raises `WaitTimeout`, whose first
line names each field in which the nearest thing seen differs from what the
rule wants; the last observed object follows.

A wait given a `Settle` ends early, with `WaitSettled`, once the
implementation has clearly answered and the answer is wrong: the object was
written after the test's last change, its status is at the current
generation, and what is judged has not changed for the settle window (at
least twice as long as the implementation took to answer). A slow but
correct implementation never meets that, so it is still waited for until the
timeout (docs/waiting.md gives the reasoning).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import tenacity
import urllib3
import yaml

from .conditions import Judgement
from .kube import ApiError, Kube

Predicate = Callable[[dict | None], "bool | Judgement"]
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
    """The awaited state did not come; the first line says what differs."""

    def __init__(self, what: str, expected: str, last: dict | None, waited: float, problem: str = "",
                 differences: tuple[str, ...] = ()) -> None:
        self.what, self.expected, self.last, self.waited = what, expected, last, waited
        self.differences = differences
        observed = "the object does not exist" if last is None else to_yaml(last)
        detail = f"\nlast problem: {problem}" if problem else ""
        super().__init__(
            f"{self.headline()}\n"
            f"expected: {expected}\n"
            f"last observed:\n{observed}{detail}"
        )

    def headline(self) -> str:
        seen = "; ".join(self.differences) or (
            "the object does not exist" if self.last is None else f"not yet: {self.expected}")
        return f"timed out after {self.waited:.1f}s waiting for {self.what}: {seen}"


class WaitSettled(WaitTimeout):
    """The implementation answered, wrongly, and the answer stood still for the settle window."""

    def __init__(self, what: str, expected: str, last: dict | None, waited: float,
                 differences: tuple[str, ...], window: float) -> None:
        self.window = window
        super().__init__(what, expected, last, waited, differences=differences)

    def headline(self) -> str:
        return (f"{self.what}: {'; '.join(self.differences)} (the implementation's answer at the current "
                f"generation stood still for {self.window:.1f}s; waited {self.waited:.1f}s)")


@dataclass(frozen=True)
class Settle:
    """When a wrong answer may end a wait before its timeout."""

    window: float  # seconds the judged answer must stand still (the minimum)
    # The resourceVersion of the test's last change: only a write after it is an
    # answer to the state the test set up. None: never end early.
    after_version: int | None
    changed_at: float  # time.monotonic() of that change


def _resource_version(obj: dict | None) -> int | None:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None  # not an etcd revision: no early end (see docs/waiting.md)


def _judge(predicate: Predicate, obj: dict | None, expected: str) -> Judgement:
    verdict = predicate(obj)
    return verdict if isinstance(verdict, Judgement) else Judgement.of(bool(verdict), expected)


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
             guard: Callable[[], None] | None = None, settle: Settle | None = None) -> dict | None:
    """Return the object (None if absent) as soon as `predicate` holds for it.

    `predicate` returns a bool or a `Judgement`. `guard`, if given, is called
    every GUARD_INTERVAL seconds at most and raises when waiting on is
    pointless (the implementation that would act has exited). `settle`, if
    given, ends the wait early once a wrong answer has settled.
    """
    start = time.monotonic()
    deadline = start + timeout
    log.debug("waiting up to %gs for %s: %s", timeout, what, expected)
    selector = f"metadata.name={name}"
    state: dict = {"last": None, "problem": "", "differences": (), "answer": None, "since": 0.0, "first": None,
                   "list": False}

    def observe(obj: dict | None) -> bool:
        """Judge one observed state: True when it holds; raises WaitSettled once a wrong answer settled."""
        state["last"] = obj
        verdict = _judge(predicate, obj, expected)
        if verdict.ok:
            return True
        state["differences"] = verdict.problems
        if settle is None or settle.after_version is None:
            return False
        rv = _resource_version(obj)
        now = time.monotonic()
        if not verdict.answered or rv is None or rv <= settle.after_version:
            state["answer"] = None  # no answer to the current state yet
            return False
        if verdict.problems != state["answer"]:
            state["answer"], state["since"] = verdict.problems, now
            if state["first"] is None:
                state["first"] = now
        if now - state["since"] >= settle_window():
            raise WaitSettled(what, expected, obj, now - start, verdict.problems, settle_window())
        return False

    def settle_window() -> float:
        # At least twice as long as the implementation took to answer the change.
        assert settle is not None
        reaction = (state["first"] or time.monotonic()) - settle.changed_at
        return max(settle.window, 2 * reaction)

    def wake_in(remaining: float) -> int:
        """Seconds the next watch may run before something has to be looked at again."""
        limit = remaining
        if guard is not None:
            limit = min(limit, GUARD_INTERVAL)
        if state["answer"] is not None:
            limit = min(limit, state["since"] + settle_window() - time.monotonic())
        return max(1, int(limit + 0.999))

    def once() -> dict | None | bool:
        if guard is not None:
            guard()
        obj = None
        if not state["list"]:
            obj = kube.get(api_version, kind, name, namespace)
            if observe(obj):
                return state["last"]
        if obj is not None:
            rv = obj["metadata"]["resourceVersion"]
        else:  # absent: a list says from which version on to watch for it
            listed = kube.list(api_version, kind, namespace, field_selector=selector)
            items = listed.get("items") or []
            if observe(items[0] if items else None):
                return state["last"]
            rv = listed["metadata"]["resourceVersion"]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        window = wake_in(remaining)
        watch_ends = time.monotonic() + window
        try:
            return watch(rv, window, watch_ends)
        except ApiError as e:
            if e.status == 410:  # the version is older than the server keeps: start again from a list
                state["list"] = True
            raise

    def watch(rv: str, window: int, watch_ends: float) -> dict | None | bool:
        for event in kube.watch(api_version, kind, namespace, resource_version=rv,
                                field_selector=selector, timeout_seconds=window):
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "BOOKMARK":
                continue
            if etype == "ERROR":  # usually 410 Gone
                raise ApiError(obj.get("code", 410), obj, "WATCH", kind)
            if observe(None if etype == "DELETED" else obj):
                return state["last"]
            if time.monotonic() >= deadline:
                return False
            if state["answer"] is not None and state["since"] + settle_window() < watch_ends:
                return True  # an answer began to settle: watch again, only until it would have settled
        return False if time.monotonic() >= deadline else True  # True: watch ended early, go again

    while True:
        try:
            for attempt in retrying(deadline):
                with attempt:
                    result = once()
        except WaitSettled:
            raise
        except Exception as e:  # a transient error outlived the deadline, or a real one
            if not transient(e):
                raise
            state["problem"] = str(e)
            result = False
        if result is True:
            continue
        if result is False:
            raise WaitTimeout(what, expected, state["last"], time.monotonic() - start, state["problem"],
                              state["differences"])
        log.debug("%s: reached after %.2fs", what, time.monotonic() - start)
        return result
