"""The in-memory copy of the watched objects, and which reconciles an event calls for.

`Cache.apply` records one watch event and returns the work items it affects,
so a Service change reconciles only the pools and routes that name that
Service, not everything. Work items are (kind, namespace, name) of the
objects whose status this controller writes.
"""

from __future__ import annotations

import threading
from typing import Iterable

from . import faults
from .model import (Key, World, extension_ref, generation, key, route_parent_refs, route_pool_keys,
                    route_service_keys, spec, terminating)

Item = tuple[str, str, str]  # (kind, namespace, name)


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
    """A `World` kept current from watch events; hold `lock` while reading it."""

    def __init__(self, controller_name: str, gateway_class: str | None = None) -> None:
        super().__init__(controller_name=controller_name, gateway_class=gateway_class)
        self.lock = threading.RLock()
        # Fault drop-first-pool-event: pools not known yet, and the resourceVersion of
        # the latest route or Gateway event that named each pool.
        self._unannounced: dict[Key, dict] = {}
        self._named_at: dict[Key, int] = {}

    # -- updates -------------------------------------------------------------

    def apply(self, kind: str, event: str, obj: dict) -> set[Item]:
        """Record a watch event (ADDED, MODIFIED, DELETED); return the affected work items."""
        with self.lock:
            store = self.store(kind)
            k = key(obj)
            old = store.get(k)
            if kind == "InferencePool":
                self._unannounced.pop(k, None)  # (fault drop-first-pool-event) its own event makes it known
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
            items = self._affected(kind, k, old, new, _version(obj))
            if faults.on("drop-first-pool-event"):
                items = self._drop_first_pool_event(kind, event, k, obj, items)
            return items

    def _drop_first_pool_event(self, kind: str, event: str, k: Key, obj: dict, items: set[Item]) -> set[Item]:
        """Fault drop-first-pool-event: a new pool's creation is lost, and the pool is known only
        once a later event involves it (its own change, or a route or Gateway event naming it).

        "Later" is by resourceVersion, not by arrival: each kind has its own watch,
        so a route created after the pool may be seen before it."""
        rv = _version(obj)
        if kind == "InferencePool":
            if event == "ADDED" and k in self.pools and self._named_at.get(k, -1) < rv:
                self._unannounced[k] = self.pools.pop(k)
                return set()
            return items
        for item in list(items):
            pk = item[1:]
            if item[0] != "InferencePool":
                continue
            self._named_at[pk] = max(self._named_at.get(pk, -1), rv)
            if pk in self._unannounced and rv > _version(self._unannounced[pk]):
                pool = self.pools[pk] = self._unannounced.pop(pk)
                items |= self._affected("InferencePool", pk, None, pool)
        return items

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

    def _affected(self, kind: str, k: Key, old: dict | None, new: dict | None, rv: int = -1) -> set[Item]:
        """The work items an event calls for; `rv` is the event's resourceVersion."""
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
                items |= {_item("InferencePool", pk) for pk in route_pool_keys(old) | route_pool_keys(new)}
            return items
        if kind == "InferencePool":
            items = {_item(kind, k)} if new is not None else set()
            if came_or_went:  # routes' ResolvedRefs depends on the pool existing
                items |= {_item("HTTPRoute", rk) for rk, r in self.routes.items() if k in route_pool_keys(r)}
            return items
        if kind == "Service":
            if not came_or_went and spec(old).get("type") == spec(new).get("type"):
                return set()
            items = {_item("InferencePool", pk) for pk, p in self.pools.items()
                     if pk[0] == k[0] and extension_ref(p)[2] == k[1]
                     # The fault: a Service change after the pool's own last change is not looked at
                     # (by resourceVersion, so a Service event that arrives late still counts).
                     and not (faults.on("resolvedrefs-ignores-service-changes")
                              and rv > _version(p))}
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
                items |= {_item("InferencePool", pk) for pk in route_pool_keys(route)}
        return items
