"""The work queue and the one worker that turns work items into status writes.

Watch threads (see `watch.py`) fill the cache and enqueue the items an event
affects; the worker computes the new status from the cache (`status.py`) and
writes it only when it differs from what the object has. Writes are PUTs on
`/status` with the resourceVersion that was read, so a concurrent writer makes
the API server answer 409 and the worker recomputes from a fresh read instead
of overwriting someone else's entries. The InferencePool APIs reconciled, one
revision each, are the cache's (`World.revisions`). With a data plane
(`dataplane.py`, `--envoy-config-dir`), every watch event also tells it to
bring Envoy's configuration up to date, and Gateways report its address.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import behaviours, faults, status
from .cache import Cache
from .kube import ApiError, Kube
from .model import Item, Key, terminating
from .watch import Watcher, start_watchers, wait_synced

if TYPE_CHECKING:
    from .dataplane import Dataplane

log = logging.getLogger(__name__)

CONFLICT_RETRIES = 5
ERROR_RETRY_SECONDS = 1.0


class WorkQueue:
    """A de-duplicating delayed queue.

    Each item is handed out at its due time, `delay` seconds after it was added
    (none by default: then it is a FIFO), earliest first. An item waiting
    already is not added twice; it keeps the earlier of its due times, so a
    burst of events for one object makes one reconcile, and many objects
    changing at once are each handed out on time (nothing waits behind another
    item's delay).
    """

    def __init__(self, delay: float = 0.0) -> None:
        self._cv = threading.Condition()
        # item -> (due, when it was first enqueued), both time.monotonic()
        self._pending: dict[Item, tuple[float, float]] = {}
        self._closed = False
        self.delay = delay

    def add(self, items: Iterable[Item], delay: float | None = None) -> None:
        now = time.monotonic()
        due = now + (self.delay if delay is None else delay)
        with self._cv:
            for item in items:
                old = self._pending.get(item)
                if old is None:
                    self._pending[item] = (due, now)
                elif due < old[0]:
                    self._pending[item] = (due, old[1])
            self._cv.notify()

    def add_after(self, item: Item, delay: float) -> None:
        self.add([item], delay)

    def get(self) -> tuple[Item, float] | None:
        """The item due first, once due, and when it was enqueued; None once closed."""
        with self._cv:
            while not self._closed:
                if not self._pending:
                    self._cv.wait()
                    continue
                item, (due, enqueued) = min(self._pending.items(), key=lambda kv: kv[1][0])
                wait = due - time.monotonic()
                if wait <= 0:
                    del self._pending[item]
                    return item, enqueued
                self._cv.wait(wait)
            return None

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class Controller:
    def __init__(self, kube: Kube, cache: Cache, dataplane: Dataplane | None = None) -> None:
        self.kube, self.cache = kube, cache
        self.dataplane = dataplane  # None: status only, no Envoy configuration written
        # Behaviour `slow`: every reconcile waits until its due time, item by item.
        self.queue = WorkQueue(behaviours.write_delay())
        self.stop_event = threading.Event()
        self.watchers: list[Watcher] = []
        self._worker = threading.Thread(target=self._run, name="worker")
        self._rewriter = threading.Thread(target=self._rewrite_managed, name="rewriter", daemon=True)
        # All three by work item, so that pools of the same name in two APIs stay apart.
        # The parentRefs this controller last wrote to each pool; how it tells
        # its own entries from other controllers' (pool entries carry no owner).
        self._owned: dict[Item, list[tuple[dict, Key]]] = {}
        # Pools this controller has had an entry on since they appeared (behaviour
        # eager-writer leaves their placeholder alone once it is back).
        self._managed: set[Item] = set()
        # Fault replace-parent-list: the status each pool was last written with.
        self._last_written: dict[Item, dict] = {}

    def start(self) -> None:
        self.watchers = start_watchers(self.kube, self.cache, self._enqueue, self.stop_event)
        if self.dataplane is not None:
            self.dataplane.start(self.kube, self.stop_event, self.queue.add,
                                 lambda: wait_synced(self.watchers, self.stop_event))
        self._worker.start()
        if behaviours.on("frequent-rewrites"):
            self._rewriter.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.queue.close()
        if self._worker.is_alive():
            self._worker.join(timeout)

    def _enqueue(self, items: set[Item]) -> None:
        """A watch event's work items go onto the queue; the data plane (if any) looks again too."""
        self.queue.add(items)
        if self.dataplane is not None:
            self.dataplane.poke()

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

    def _rewrite_managed(self) -> None:
        """Behaviour frequent-rewrites: reconcile every pool and route with an entry of ours, often.

        The condition messages carry the number of the round (`status.as_written`),
        so each of these reconciles writes, with no change of meaning."""
        if not wait_synced(self.watchers, self.stop_event):
            return
        while not self.stop_event.wait(behaviours.rewrite_seconds()):
            with self.cache.lock:
                items = {(pool_kind, *pk) for pool_kind, rev in self.cache.pool_kinds.items()
                         for pk, p in self.cache.store(pool_kind).items()
                         if status.pool_has_entry_of(p, self.cache, rev, self._owned.get((pool_kind, *pk), []))}
                items |= {("HTTPRoute", *rk) for rk, r in self.cache.routes.items()
                          if status.route_has_entry_of(r, self.cache)}
            if items:
                log.info("rewrite round %d: %d object(s)", behaviours.next_rewrite_round(), len(items))
                self.queue.add(items)

    def reconcile(self, item: Item, enqueued: float | None = None) -> None:
        kind, ns, name = item
        k = (ns, name)
        fresh: dict | None = None  # set after a conflict: the object as the server has it now
        for _ in range(CONFLICT_RETRIES):
            with self.cache.lock:
                obj = fresh or self.cache.store(kind).get(k)
                if obj is None or terminating(obj):
                    if obj is None:
                        self._owned.pop(item, None)
                        self._managed.discard(item)
                        self._last_written.pop(item, None)
                    return
                if kind in self.cache.pool_kinds and faults.on("replace-parent-list") and item in self._last_written:
                    # Computed from its own record of what it wrote, not from the object as it is now.
                    obj = {**obj, "status": self._last_written[item]}
                new_status, owned = self._compute(item, obj)
            if owned:
                self._managed.add(item)
            if new_status == (obj.get("status") or {}):
                if owned is not None:
                    self._owned[item] = owned
                return
            if kind == "HTTPRoute" and faults.on("route-status-missing"):
                return
            started = time.monotonic()
            resource = self.cache.resources[kind]
            try:
                written = self._write(item, obj, new_status)
            except ApiError as e:
                if e.status == 404:
                    return
                if e.status != 409:
                    raise
                fresh = self.kube.get(resource, name, ns or None)
                if fresh is None:
                    return
                continue
            if owned is not None:
                self._owned[item] = owned
            self.cache.written(kind, written, obj["metadata"].get("resourceVersion"))
            done = time.monotonic()
            since_event = f"{(done - enqueued) * 1000:.1f} ms after the event, " if enqueued is not None else ""
            log.info("wrote %s %s status %s (%sthe write took %.1f ms)", resource.kind, "/".join(filter(None, k)),
                     self._summary(kind, new_status), since_event, (done - started) * 1000)
            return
        raise RuntimeError(f"gave up after {CONFLICT_RETRIES} conflicting writes")

    def _write(self, item: Item, obj: dict, new_status: dict) -> dict:
        """PUT the status on /status with the resourceVersion read (409 if someone wrote since)."""
        kind = item[0]
        resource = self.cache.resources[kind]
        rev = self.cache.pool_kinds.get(kind)
        if rev is not None and faults.on("replace-parent-list"):
            # A JSON merge patch replaces the whole list, and carries no
            # resourceVersion: whatever was added since its last write is lost.
            md = obj["metadata"]
            written = self.kube.patch_status(resource, md["name"], md.get("namespace"),
                                             {"status": {rev.status_key: new_status.get(rev.status_key)}})
            self._last_written[item] = new_status
            return written
        body = {**obj, "status": new_status}
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        return self.kube.replace_status(resource, body)

    def _compute(self, item: Item, obj: dict) -> tuple[dict, list | None]:
        kind = item[0]
        now = status.timestamp()
        unchanged = obj.get("status") or {}
        if kind == "GatewayClass":  # ours-ness may have changed since the item was queued
            return (status.gatewayclass_status(obj, now) if self.cache.class_is_ours(obj) else unchanged), None
        if kind == "Gateway":
            if not self.cache.gateway_is_ours(obj):
                return unchanged, None
            st = status.gateway_status(obj, now)
            if self.dataplane is not None:  # its address, and Programmed as the data plane has it
                st = self.dataplane.gateway_status(st, obj, now)
            return st, None
        if kind == "HTTPRoute":
            return status.route_status(obj, self.cache, now), None
        rev = self.cache.pool_kinds.get(kind)
        if rev is not None:
            result = status.pool_status(obj, self.cache, rev, self._owned.get(item, []), now)
            st = result.status
            if behaviours.on("eager-writer"):
                managed = bool(result.owned) or item in self._managed
                st = status.eager_pool_status(st, rev, managed=managed)
            return st, result.owned
        raise KeyError(kind)

    def _summary(self, kind: str, st: dict) -> str:
        """A one-line digest of the status written, for the log: a pool's list of entries
        under its API's name for it (`parent=` or `parents=`), a route's `parents=`."""
        rev = self.cache.pool_kinds.get(kind)
        if rev is not None or kind == "HTTPRoute":
            list_key = rev.status_key if rev is not None else "parents"
            parts = [f"{(e.get('parentRef') or {}).get('name')}[{_conditions(e.get('conditions') or [])}]"
                     for e in st.get(list_key) or []]
            return f"{list_key}=" + (" ".join(parts) or "none")
        return _conditions(st.get("conditions") or [])


def _conditions(conds: list[dict]) -> str:
    return ",".join(f"{c['type']}={c['status']}/{c['reason']}" for c in conds)
