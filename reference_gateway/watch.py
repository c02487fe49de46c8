"""One thread per watched resource: list, then watch from that list's resourceVersion.

Every event goes into the cache, and the work items it affects go onto the
queue at once. A watch that ends is resumed from the last resourceVersion
seen; an expired one (410 Gone) starts over with a fresh list; connection
errors are retried with exponential backoff. A resource the API server does
not serve when it is first listed (404: its CRD is not installed, say an
InferencePool API named with --api-revision that the cluster lacks) counts
as listed and empty, so the other resources are reconciled meanwhile; it is
listed again, with backoff, until it is served. Behaviour lagging-cache hands
each change after the first list to the cache late (`_Lag`), in order.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from . import behaviours
from .cache import Cache
from .kube import ApiError, Kube
from .model import Item, Resource

log = logging.getLogger(__name__)

WATCH_SECONDS = 300
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0


class _Expired(Exception):
    """The resourceVersion is too old to watch from: list again."""


class _Lag(threading.Thread):
    """Behaviour lagging-cache: runs each change it is handed `seconds` after it came, in order."""

    def __init__(self, kind: str, seconds: float, stop: threading.Event) -> None:
        super().__init__(name=f"lag-{kind}", daemon=True)
        self.kind, self.seconds, self.stop = kind, seconds, stop
        self._changes: queue.Queue[tuple[float, str, Callable[[], None]]] = queue.Queue()
        self._shown = False

    def put(self, what: str, change: Callable[[], None]) -> None:
        self._changes.put((time.monotonic() + self.seconds, what, change))

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                due, what, change = self._changes.get(timeout=0.2)
            except queue.Empty:
                continue
            if self.stop.wait(max(0.0, due - time.monotonic())):
                return
            change()
            if not self._shown:  # the evidence that the lag is real, once
                self._shown = True
                log.info("%s changes reach the cache %.2fs late (the first: %s)", self.kind, self.seconds, what)


class Watcher(threading.Thread):
    def __init__(self, kube: Kube, resource: Resource, cache: Cache, enqueue: Callable[[set[Item]], None],
                 stop: threading.Event, lag: float = 0.0) -> None:
        # Daemon: a thread blocked reading a quiet watch must not hold up exit.
        super().__init__(name=f"watch-{resource.id}", daemon=True)
        self.kube, self.resource, self.kind = kube, resource, resource.id
        self.cache, self.enqueue, self.stop = cache, enqueue, stop
        self.synced = threading.Event()  # set once the first list is in the cache (or found not served)
        self._listed = False  # a list has succeeded once
        self._lag = _Lag(self.kind, lag, stop) if lag > 0 else None

    def start(self) -> None:
        if self._lag is not None:
            self._lag.start()
        super().start()

    def _change(self, what: str, change: Callable[[], None]) -> None:
        """Hand a change to the cache: at once, or late under lagging-cache (never the first list,
        which the controller waits for)."""
        if self._lag is not None and self._listed:
            self._lag.put(what, change)
        else:
            change()

    def run(self) -> None:
        rv: str | None = None
        backoff = BACKOFF_FIRST
        while not self.stop.is_set():
            try:
                if rv is None:
                    rv = self._relist()
                rv = self._watch(rv)
                backoff = BACKOFF_FIRST
            except _Expired:
                rv = None
            except Exception as e:  # connection refused/reset, timeouts, 5xx: try again
                if isinstance(e, ApiError) and e.status == 410:
                    rv = None
                    continue
                if rv is None and not self._listed and isinstance(e, ApiError) and e.status == 404:
                    self._not_served(e, backoff)
                else:
                    log.warning("%s watch: %s; retrying in %.1fs", self.kind, e, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _not_served(self, e: ApiError, backoff: float) -> None:
        """The first list found no such resource: it counts as empty until it is served."""
        if not self.synced.is_set():
            log.warning("%s %s is not served by the API server (is its CRD installed?); counting it as empty "
                        "and listing it again until it is served", self.resource.api_version, self.resource.kind)
            self.synced.set()
        else:
            log.debug("%s still not served: %s; listing again in %.1fs", self.kind, e, backoff)

    def _relist(self) -> str:
        listed = self.kube.list(self.resource)
        items = listed.get("items") or []
        for obj in items:  # list items come without apiVersion/kind
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
        self._change(f"a list of {len(items)}", lambda: self.enqueue(self.cache.replace_all(self.kind, items)))
        self._listed = True
        self.synced.set()
        log.debug("listed %d %s(s)", len(items), self.kind)
        return listed["metadata"]["resourceVersion"]

    def _watch(self, rv: str) -> str:
        """Follow one watch until the server ends it; return the last resourceVersion seen."""
        for event in self.kube.watch(self.resource, resource_version=rv, timeout_seconds=WATCH_SECONDS):
            if self.stop.is_set():
                break
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise _Expired()
                raise ApiError(obj.get("code") or 0, obj, "WATCH", self.kind)
            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            if etype in ("ADDED", "MODIFIED", "DELETED"):
                obj.setdefault("apiVersion", self.resource.api_version)
                obj.setdefault("kind", self.resource.kind)
                md = obj.get("metadata") or {}
                self._change(f"{etype} {md.get('namespace', '')}/{md.get('name')}",
                             lambda etype=etype, obj=obj: self.enqueue(self.cache.apply(self.kind, etype, obj)))
        return rv


def start_watchers(kube: Kube, cache: Cache, enqueue: Callable[[set[Item]], None],
                   stop: threading.Event) -> list[Watcher]:
    resources = list(cache.resources.values())
    watchers = [Watcher(kube, resource, cache, enqueue, stop, behaviours.cache_lag(i, len(resources)))
                for i, resource in enumerate(resources)]
    for w in watchers:
        w.start()
    return watchers


def wait_synced(watchers: list[Watcher], stop: threading.Event) -> bool:
    """Block until every resource has been listed once (or `stop`); True when synced."""
    for w in watchers:
        while not w.synced.wait(0.2):  # the timeout only lets `stop` be noticed
            if stop.is_set():
                return False
    return not stop.is_set()
