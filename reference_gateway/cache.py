"""The in-memory copy of the watched objects, and which reconciles an event calls for.

`Cache.apply` records one watch event and returns the work items it affects,
so a Service change reconciles only the pools and routes that name that
Service, not everything. Work items are (resource id, namespace, name) of the
objects whose status this controller writes (`model.Item`); an InferencePool's
resource id names its API group, so the pools of two APIs never mix.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from . import faults
from .model import Item, Key, World, generation, key, route_parent_refs, route_service_keys, spec, terminating
from .revisions import DEFAULT, REVISIONS, Revision


def slim(kind: str, obj: dict) -> dict:
    """What the controller keeps of an object: managedFields are noise, Services need only their type."""
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if kind == "Service":
        keep = {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in md}
        return {"apiVersion": "v1", "kind": "Service", "metadata": keep,
                "spec": {"type": spec(obj).get("type", "ClusterIP")}}
    return {**obj, "metadata": md}


def _version(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except ValueError:
        return -1


def _item(kind: str, k: Key) -> Item:
    return kind, k[0], k[1]


class Cache(World):
    """A `World` kept current from watch events; hold `lock` while reading it.

    `revisions`: the InferencePool APIs to keep, one revision each (default: the seed's)."""

    def __init__(self, controller_name: str, gateway_class: str | None = None,
                 revisions: Iterable[Revision] | None = None) -> None:
        super().__init__(controller_name=controller_name, gateway_class=gateway_class,
                         revisions=(REVISIONS[DEFAULT],) if revisions is None else revisions)
        self.lock = threading.RLock()
        # Fault drop-first-pool-event: pools not known yet, and the resourceVersion of
        # the latest route or Gateway event that named each pool (by work item).
        self._unannounced: dict[Item, dict] = {}
        self._named_at: dict[Item, int] = {}
        # Fault resolvedrefs-ignores-service-changes: every version of each Service seen
        # (resourceVersion, the Service or None once deleted), and the resourceVersion at
        # which each pool's spec last changed (its first event with its generation).
        self._service_history: dict[Key, list[tuple[int, dict | None]]] = {}
        self._spec_version: dict[Item, int] = {}

    # -- updates -------------------------------------------------------------

    def apply(self, kind: str, event: str, obj: dict) -> set[Item]:
        """Record a watch event (ADDED, MODIFIED, DELETED); return the affected work items."""
        with self.lock:
            store = self.store(kind)
            k = key(obj)
            old = store.get(k)
            if kind in self.pool_kinds:  # (fault drop-first-pool-event) its own event makes it known
                self._unannounced.pop(_item(kind, k), None)
            if event == "DELETED":
                if kind == "Service" and faults.on("no-invalid-ref-on-delete"):
                    return set()
                if old is None:
                    return set()
                del store[k]
                new = None
            else:
                new = slim(kind, obj)
                if old is not None and old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
                    return set()  # already seen (e.g. our own write, stored from the response)
                if kind == "Service" and old is not None and faults.on("externalname-only-on-switch"):
                    new["spec"]["type"] = old["spec"]["type"]  # the type it had when first seen, for good
                store[k] = new
            if faults.on("resolvedrefs-ignores-service-changes"):
                self._record_versions(kind, event, k, old, new, obj)
            items = self._affected(kind, k, old, new)
            if faults.on("drop-first-pool-event"):
                items = self._drop_first_pool_event(kind, event, k, obj, items)
            return items

    def _drop_first_pool_event(self, kind: str, event: str, k: Key, obj: dict, items: set[Item]) -> set[Item]:
        """Fault drop-first-pool-event: a new pool's creation is lost, and the pool is known only
        once a later event involves it (its own change, or a route or Gateway event naming it).

        "Later" is by resourceVersion, not by arrival: each kind has its own watch,
        so a route created after the pool may be seen before it."""
        rv = _version(obj)
        if kind in self.pool_kinds:
            pools, item = self.store(kind), _item(kind, k)
            if event == "ADDED" and k in pools and self._named_at.get(item, -1) < rv:
                self._unannounced[item] = pools.pop(k)
                return set()
            return items
        for item in list(items):
            pool_kind, pk = item[0], item[1:]
            if pool_kind not in self.pool_kinds:
                continue
            self._named_at[item] = max(self._named_at.get(item, -1), rv)
            if item in self._unannounced and rv > _version(self._unannounced[item]):
                pool = self.store(pool_kind)[pk] = self._unannounced.pop(item)
                items |= self._affected(pool_kind, pk, None, pool)
        return items

    def _record_versions(self, kind: str, event: str, k: Key, old: dict | None, new: dict | None,
                         obj: dict) -> None:
        """Fault resolvedrefs-ignores-service-changes: keep what `picker_service` looks back at.
        A deletion found by a relist has no resourceVersion of its own: it counts as after everything."""
        rv = _version(obj) if event != "DELETED" or obj is not old else 1 << 62
        if kind == "Service":
            self._service_history.setdefault(k, []).append((rv, new))
        elif kind in self.pool_kinds:
            item = _item(kind, k)
            if new is None:
                self._spec_version.pop(item, None)
            elif old is None or generation(old) != generation(new):
                self._spec_version[item] = rv

    def picker_service(self, ns: str, name: str, pool: dict) -> dict | None:
        if not faults.on("resolvedrefs-ignores-service-changes"):
            return super().picker_service(ns, name, pool)
        # The fault: the Service as it was when the pool's spec last changed; any change
        # to it since (created, deleted, retyped) is not seen until the pool's spec changes.
        since = self._spec_version.get(_item(self.resource_id(pool), key(pool)))
        if since is None:
            return super().picker_service(ns, name, pool)
        seen = [svc for rv, svc in self._service_history.get((ns, name), []) if rv <= since]
        return seen[-1] if seen else None

    def replace_all(self, kind: str, objs: Iterable[dict]) -> set[Item]:
        """A fresh list replaces what was known: missing objects count as deleted."""
        with self.lock:
            items: set[Item] = set()
            fresh = {key(o): o for o in objs}
            for k in list(self.store(kind)):
                if k not in fresh:
                    items |= self.apply(kind, "DELETED", self.store(kind)[k])
            for o in fresh.values():
                items |= self.apply(kind, "MODIFIED", o)
            return items

    def written(self, kind: str, obj: dict, based_on: str) -> None:
        """Store the object our status write returned, unless a newer event already arrived."""
        with self.lock:
            store = self.store(kind)
            k = key(obj)
            cur = store.get(k)
            if cur is not None and cur["metadata"].get("resourceVersion") == based_on:
                store[k] = slim(kind, obj)

    # -- what an event affects -----------------------------------------------

    def _affected(self, kind: str, k: Key, old: dict | None, new: dict | None) -> set[Item]:
        """The work items an event calls for."""
        came_or_went = old is None or new is None or terminating(old) != terminating(new)
        if kind == "GatewayClass":
            items = {_item(kind, k)} if new is not None and self.class_is_ours(new) else set()
            if came_or_went:  # whether Gateways of this class are ours just changed
                for gk, gw in self.gateways.items():
                    if spec(gw).get("gatewayClassName") == k[1]:
                        items |= self._gateway_fanout(gk)
            return items
        if kind == "Gateway":
            items = {_item(kind, k)} if new is not None and self.gateway_is_ours(new) else set()
            if came_or_went or generation(old) != generation(new) or \
                    spec(old).get("gatewayClassName") != spec(new).get("gatewayClassName"):
                items |= self._gateway_fanout(k)
            return items
        if kind == "HTTPRoute":
            items = {_item(kind, k)} if new is not None else set()
            if came_or_went or generation(old) != generation(new):
                items |= self.route_pool_items(old) | self.route_pool_items(new)
            return items
        if kind in self.pool_kinds:
            items = {_item(kind, k)} if new is not None else set()
            if came_or_went:  # routes' ResolvedRefs depends on the pool existing
                items |= {_item("HTTPRoute", rk) for rk, r in self.routes.items()
                          if _item(kind, k) in self.route_pool_items(r)}
            return items
        if kind == "Service":
            if not came_or_went and spec(old).get("type") == spec(new).get("type"):
                return set()
            items = {_item(pool_kind, pk) for pool_kind, rev in self.pool_kinds.items()
                     for pk, p in self.store(pool_kind).items()
                     if pk[0] == k[0] and (ref := rev.picker_ref(p)) is not None and ref.name == k[1]}
            items |= {_item("HTTPRoute", rk) for rk, r in self.routes.items() if k in route_service_keys(r)}
            return items
        raise KeyError(kind)

    def _gateway_fanout(self, gk: Key) -> set[Item]:
        """The Gateway, the routes attached to it and the pools those routes send to."""
        items: set[Item] = set()
        if self.gateway_is_ours(self.gateways.get(gk)):
            items.add(_item("Gateway", gk))
        for rk, route in self.routes.items():
            if any(g == gk for _, g in route_parent_refs(route)):
                items.add(_item("HTTPRoute", rk))
                items |= self.route_pool_items(route)
        return items
