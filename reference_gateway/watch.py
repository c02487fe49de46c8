"""One thread per kind: list, then watch from that list's resourceVersion.

Every event goes into the cache, and the work items it affects go onto the
queue at once. A watch that ends is resumed from the last resourceVersion
seen; an expired one (410 Gone) starts over with a fresh list; connection
errors are retried with exponential backoff.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from conformance.kube import ApiError, Kube

from .cache import Cache, Item
from .model import KINDS

log = logging.getLogger(__name__)

WATCH_SECONDS = 300
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0


class _Expired(Exception):
    """The resourceVersion is too old to watch from: list again."""


class Watcher(threading.Thread):
    def __init__(self, kube: Kube, kind: str, cache: Cache, enqueue: Callable[[set[Item]], None],
                 stop: threading.Event) -> None:
        # Daemon: a thread blocked reading a quiet watch must not hold up exit.
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.kube, self.kind, self.api_version = kube, kind, KINDS[kind]
        self.cache, self.enqueue, self.stop = cache, enqueue, stop
        self.synced = threading.Event()  # set once the first list is in the cache

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
                log.warning("%s watch: %s; retrying in %.1fs", self.kind, e, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _relist(self) -> str:
        listed = self.kube.list(self.api_version, self.kind)
        items = listed.get("items") or []
        for obj in items:  # list items of built-in kinds come without apiVersion/kind
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
        self.enqueue(self.cache.replace_all(self.kind, items))
        self.synced.set()
        log.debug("listed %d %s(s)", len(items), self.kind)
        return listed["metadata"]["resourceVersion"]

    def _watch(self, rv: str) -> str:
        """Follow one watch until the server ends it; return the last resourceVersion seen."""
        for event in self.kube.watch(self.api_version, self.kind, None, resource_version=rv,
                                     timeout_seconds=WATCH_SECONDS):
            if self.stop.is_set():
                break
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise _Expired()
                raise ApiError(obj.get("code") or 0, obj, "WATCH", self.kind)
            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            if etype in ("ADDED", "MODIFIED", "DELETED"):
                obj.setdefault("apiVersion", self.api_version)
                obj.setdefault("kind", self.kind)
                self.enqueue(self.cache.apply(self.kind, etype, obj))
        return rv


def start_watchers(kube: Kube, cache: Cache, enqueue: Callable[[set[Item]], None],
                   stop: threading.Event) -> list[Watcher]:
    watchers = [Watcher(kube, kind, cache, enqueue, stop) for kind in KINDS]
    for w in watchers:
        w.start()
    return watchers


def wait_synced(watchers: list[Watcher], stop: threading.Event) -> bool:
    """Block until every kind has been listed once (or `stop`); True when synced."""
    for w in watchers:
        while not w.synced.wait(0.2):  # the timeout only lets `stop` be noticed
            if stop.is_set():
                return False
    return not stop.is_set()
