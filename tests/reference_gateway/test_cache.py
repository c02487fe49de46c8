"""Which work items a watch event calls for, and the worker's write path (fake API)."""

from __future__ import annotations

import copy

from reference_gateway import status
from reference_gateway.cache import Cache
from reference_gateway.controller import WorkQueue
from reference_gateway.revisions import REVISIONS

from .objects import NS, controller_for

POOL = ("InferencePool", NS, "pool")
ROUTE = ("HTTPRoute", NS, "route")
GW = ("Gateway", NS, "gw")


def modified(obj, rv="2", **changes):
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = rv
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def loaded(objs, *extra) -> Cache:
    cache = Cache(objs.controller)
    for o in [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service(),
              objs.pool("unrelated", ext={"name": "other-svc"}), *extra]:
        cache.apply(o["kind"], "ADDED", o)
    return cache


def test_service_events_reach_only_pools_and_routes_that_name_it(objs):
    cache = loaded(objs, objs.route("svc-route", pools=(), backends=[{"name": "epp", "port": 9002}]))
    svc = objs.service()
    assert cache.apply("Service", "MODIFIED", modified(svc, metadata__labels={"a": "b"})) == set()
    assert cache.apply("Service", "MODIFIED", modified(svc, "3", spec__type="ExternalName")) == {
        POOL, ("HTTPRoute", NS, "svc-route")}
    assert cache.apply("Service", "DELETED", svc) == {POOL, ("HTTPRoute", NS, "svc-route")}
    assert (NS, "epp") not in cache.services
    assert cache.apply("Service", "ADDED", objs.service("nobody-uses")) == set()


def test_route_events_reach_the_route_and_old_and_new_pools(objs):
    cache = loaded(objs)
    route = objs.route(pools=("pool2",), generation=2)
    route["metadata"]["resourceVersion"] = "2"
    assert cache.apply("HTTPRoute", "MODIFIED", route) == {ROUTE, POOL, ("InferencePool", NS, "pool2")}
    # A status-only change (same generation) concerns the route alone.
    assert cache.apply("HTTPRoute", "MODIFIED", modified(route, "3", status={"parents": []})) == {ROUTE}
    assert cache.apply("HTTPRoute", "DELETED", route) == {("InferencePool", NS, "pool2")}


def test_an_event_seen_before_changes_nothing(objs):
    cache = loaded(objs)
    assert cache.apply("InferencePool", "MODIFIED", objs.pool()) == set()


def test_gateway_events_fan_out_only_on_spec_changes(objs):
    cache = loaded(objs)
    gw = objs.gateway()
    assert cache.apply("Gateway", "MODIFIED", modified(gw, status={"conditions": []})) == {GW}
    assert cache.apply("Gateway", "MODIFIED", modified(gw, "3", metadata__generation=2)) == {GW, ROUTE, POOL}
    assert cache.apply("Gateway", "DELETED", gw) == {ROUTE, POOL}


def test_gatewayclass_arrival_reaches_its_gateways(objs):
    cache = Cache(objs.controller)
    for o in [objs.gateway(), objs.route(), objs.pool(), objs.service()]:
        cache.apply(o["kind"], "ADDED", o)
    assert cache.apply("GatewayClass", "ADDED", objs.gateway_class()) == {("GatewayClass", "", "ours"), GW,
                                                                        ROUTE, POOL}
    assert cache.apply("GatewayClass", "ADDED", objs.gateway_class("theirs", "example.com/x")) == set()


def test_pool_arrival_reaches_routes_that_send_to_it(objs):
    cache = loaded(objs)
    assert cache.apply("InferencePool", "ADDED", objs.pool("new")) == {("InferencePool", NS, "new")}
    cache.apply("HTTPRoute", "ADDED", objs.route("r2", pools=("later",)))
    assert cache.apply("InferencePool", "ADDED", objs.pool("later")) == {("InferencePool", NS, "later"),
                                                                          ("HTTPRoute", NS, "r2")}


def test_relist_drops_what_is_gone(objs):
    cache = loaded(objs)
    items = cache.replace_all("Service", [])
    assert (NS, "epp") not in cache.services and POOL in items


def test_services_are_kept_slim(objs):
    cache = loaded(objs)
    assert cache.services[(NS, "epp")]["spec"] == {"type": "ClusterIP"}


def test_queue_deduplicates_and_keeps_first_time():
    q = WorkQueue()
    q.add([POOL, ROUTE])
    q.add([POOL])
    (item, _), (item2, _) = q.get(), q.get()
    assert (item, item2) == (POOL, ROUTE)
    q.close()
    assert q.get() is None


def test_writes_once_then_nothing(objs):
    everything = [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service()]
    ctl, kube = controller_for(objs, everything)
    ctl.reconcile(POOL)
    assert len(kube.puts) == 1
    ctl.reconcile(POOL)  # the cache now holds the written object: nothing to do
    assert len(kube.puts) == 1


def test_conflict_rereads_and_keeps_the_concurrent_entry(objs):
    theirs = {"parentRef": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "x",
                            "namespace": NS}, "conditions": []}
    base = [objs.gateway_class(), objs.gateway(), objs.route(), objs.service()]
    on_server = objs.pool(status={"parent": [theirs]})
    on_server["metadata"]["resourceVersion"] = "7"
    ctl, kube = controller_for(objs, base + [on_server], base + [objs.pool()])
    ctl.reconcile(POOL)
    assert [p["metadata"]["resourceVersion"] for p in kube.puts] == ["1", "7"]
    parents = kube.objects[POOL]["status"]["parent"]
    assert parents[0] == theirs and parents[1]["parentRef"]["name"] == "gw"


def test_terminating_objects_are_not_written(objs):
    route = objs.route()
    route["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    ctl, kube = controller_for(objs, [objs.gateway_class(), objs.gateway(), route, objs.pool(), objs.service()])
    ctl.reconcile(ROUTE)
    assert kube.puts == []


def test_status_functions_do_not_mutate_their_input(objs):
    everything = [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service()]
    cache = Cache(objs.controller)
    for o in everything:
        cache.apply(o["kind"], "ADDED", o)
    before = copy.deepcopy(cache.__dict__["pools"]), copy.deepcopy(cache.routes)
    status.pool_status(cache.pools[(NS, "pool")], cache, REVISIONS["seed"], [], "2025-01-01T00:00:00Z")
    status.route_status(cache.routes[(NS, "route")], cache, "2025-01-01T00:00:00Z")
    assert (cache.pools, cache.routes) == before
