"""The work queue and the one worker that turns work items into status writes.

Watch threads (see `watch.py`) fill the cache and enqueue the items an event
affects; the worker computes the new status from the cache (`status.py`) and
writes it only when it differs from what the object has. Writes are PUTs on
`/status` with the resourceVersion that was read, so a concurrent writer makes
the API server answer 409 and the worker recomputes from a fresh read instead
of overwriting someone else's entries.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from conformance.kube import ApiError, Kube

from . import faults, status
from .cache import Cache, Item
from .model import KINDS, Key, key, terminating
from .revisions import Revision
from .watch import Watcher, start_watchers, wait_synced

log = logging.getLogger(__name__)

CONFLICT_RETRIES = 5
ERROR_RETRY_SECONDS = 1.0


class WorkQueue:
    """A de-duplicating FIFO: an item waiting already is not added twice."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._pending: dict[Item, float] = {}  # item -> when it was first enqueued (monotonic)
        self._closed = False

    def add(self, items: Iterable[Item]) -> None:
        now = time.monotonic()
        with self._cv:
            for item in items:
                self._pending.setdefault(item, now)
            self._cv.notify()

    def add_after(self, item: Item, delay: float) -> None:
        t = threading.Timer(delay, self.add, ([item],))
        t.daemon = True
        t.start()

    def get(self) -> tuple[Item, float] | None:
        """The oldest item and when it was enqueued; None once closed."""
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            item = next(iter(self._pending))
            return item, self._pending.pop(item)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class Controller:
    def __init__(self, kube: Kube, cache: Cache, revision: Revision) -> None:
        self.kube, self.cache, self.revision = kube, cache, revision
        self.queue = WorkQueue()
        self.stop_event = threading.Event()
        self.watchers: list[Watcher] = []
        self._worker = threading.Thread(target=self._run, name="worker")
        # The parentRefs this controller last wrote to each pool; how it tells
        # its own entries from other controllers' (pool entries carry no owner).
        self._owned: dict[Key, list[tuple[dict, Key]]] = {}

    def start(self) -> None:
        self.watchers = start_watchers(self.kube, self.cache, self.queue.add, self.stop_event)
        self._worker.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.queue.close()
        if self._worker.is_alive():
            self._worker.join(timeout)

    # -- the worker ------------------------------------------------------------

    def _run(self) -> None:
        # Reconciling before every kind is listed would compute from half a
        # picture (e.g. remove a pool's entry because its route is not listed yet).
        if not wait_synced(self.watchers, self.stop_event):
            return
        log.info("caches synced; reconciling")
        while True:
            got = self.queue.get()
            if got is None:
                return
            item, enqueued = got
            try:
                self.reconcile(item, enqueued)
            except Exception as e:  # keep the worker alive; try the item again shortly
                log.warning("%s %s/%s: %s; retrying in %.0fs", *item, e, ERROR_RETRY_SECONDS)
                self.queue.add_after(item, ERROR_RETRY_SECONDS)

    def reconcile(self, item: Item, enqueued: float | None = None) -> None:
        kind, ns, name = item
        k = (ns, name)
        fresh: dict | None = None  # set after a conflict: the object as the server has it now
        for _ in range(CONFLICT_RETRIES):
            with self.cache.lock:
                obj = fresh or self.cache.store(kind).get(k)
                if obj is None or terminating(obj):
                    if obj is None:
                        self._owned.pop(k, None)
                    return
                new_status, owned = self._compute(kind, obj)
            if new_status == (obj.get("status") or {}):
                if owned is not None:
                    self._owned[k] = owned
                return
            if kind == "HTTPRoute" and faults.on("route-status-missing"):
                return
            body = {**obj, "status": new_status}
            body.setdefault("apiVersion", KINDS[kind])
            body.setdefault("kind", kind)
            started = time.monotonic()
            try:
                written = self.kube.replace(body, subresource="status")
            except ApiError as e:
                if e.status == 404:
                    return
                if e.status != 409:
                    raise
                fresh = self.kube.get(KINDS[kind], kind, name, ns or None)
                if fresh is None:
                    return
                continue
            if owned is not None:
                self._owned[k] = owned
            self.cache.written(kind, written, obj["metadata"].get("resourceVersion"))
            done = time.monotonic()
            since_event = f"{(done - enqueued) * 1000:.1f} ms after the event, " if enqueued is not None else ""
            log.info("wrote %s %s status %s (%sthe PUT took %.1f ms)", kind, "/".join(filter(None, k)),
                     _summary(kind, new_status), since_event, (done - started) * 1000)
            return
        raise RuntimeError(f"gave up after {CONFLICT_RETRIES} conflicting writes")

    def _compute(self, kind: str, obj: dict) -> tuple[dict, list | None]:
        now = status.timestamp()
        unchanged = obj.get("status") or {}
        if kind == "GatewayClass":  # ours-ness may have changed since the item was queued
            return (status.gatewayclass_status(obj, now) if self.cache.class_is_ours(obj) else unchanged), None
        if kind == "Gateway":
            return (status.gateway_status(obj, now) if self.cache.gateway_is_ours(obj) else unchanged), None
        if kind == "HTTPRoute":
            return status.route_status(obj, self.cache, now), None
        if kind == "InferencePool":
            result = status.pool_status(obj, self.cache, self.revision, self._owned.get(key(obj), []), now)
            return result.status, result.owned
        raise KeyError(kind)


def _conditions(conds: list[dict]) -> str:
    return ",".join(f"{c['type']}={c['status']}/{c['reason']}" for c in conds)


def _summary(kind: str, st: dict) -> str:
    """A one-line digest of the status written, for the log."""
    if kind == "InferencePool":
        parts = [f"{(e.get('parentRef') or {}).get('name')}[{_conditions(e.get('conditions') or [])}]"
                 for e in st.get("parent") or []]
        return "parent=" + (" ".join(parts) or "none")
    if kind == "HTTPRoute":
        parts = [f"{(e.get('parentRef') or {}).get('name')}[{_conditions(e.get('conditions') or [])}]"
                 for e in st.get("parents") or []]
        return "parents=" + (" ".join(parts) or "none")
    return _conditions(st.get("conditions") or [])
