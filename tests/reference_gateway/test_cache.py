"""Which work items a watch event calls for, and the worker's write path (fake API), under both APIs."""

from __future__ import annotations

import copy

import pytest

from reference_gateway import faults, status
from reference_gateway.cache import Cache
from reference_gateway.controller import WorkQueue
from reference_gateway.revisions import DEFAULT

from .objects import NS, Objects, controller_for

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
    return objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service(),
                       objs.pool("unrelated", picker={"name": "other-svc"}), *extra)


def pool_kind(objs) -> str:
    return objs.pool_item()[0]


def test_default_cache_watches_the_seed_api():
    cache = Cache("example.com/x")
    assert [r.name for r in cache.revisions.values()] == [DEFAULT]
    assert set(cache.resources) == {"GatewayClass", "Gateway", "HTTPRoute", "Service",
                                    "InferencePool.inference.networking.x-k8s.io"}


def test_both_apis_are_kept_apart():
    x, ga = Objects("v0.5"), Objects("v1.6")
    cache = x.cache(revisions=(x.rev, ga.rev))
    assert cache.resource_id(x.pool()) != cache.resource_id(ga.pool())
    for o in (x.pool(), ga.pool(picker={"name": "epp2"})):
        cache.apply(cache.resource_id(o), "ADDED", o)
    assert set(cache.pools) == {x.f.group, ga.f.group}
    assert cache.pools[x.f.group][(NS, "pool")]["spec"] != cache.pools[ga.f.group][(NS, "pool")]["spec"]
    # Each Service reaches the pool of the API whose reference names it.
    assert cache.apply("Service", "ADDED", x.service("epp")) == {x.pool_item()}
    assert cache.apply("Service", "ADDED", x.service("epp2")) == {ga.pool_item()}
    # A route to both reaches both; to the v1 pool alone, that one.
    route = x.route(backends=[ga.pool_backend("pool")])
    assert cache.apply("HTTPRoute", "ADDED", route) == {ROUTE, x.pool_item(), ga.pool_item()}
    assert cache.apply("HTTPRoute", "ADDED", ga.route("r2")) == {("HTTPRoute", NS, "r2"), ga.pool_item()}
    # A pool's coming and going reaches the routes that name it in its own API only.
    gone = ga.pool()
    assert cache.apply(cache.resource_id(gone), "DELETED", gone) == {ROUTE, ("HTTPRoute", NS, "r2")}
    assert (NS, "pool") in cache.pools[x.f.group]


def test_route_to_an_api_not_watched_reaches_no_pool():
    x, ga = Objects("seed"), Objects("v1.6")
    cache = x.cache()
    assert cache.apply("HTTPRoute", "ADDED", ga.route()) == {ROUTE}
    with pytest.raises(KeyError):
        cache.resource_id(ga.pool())


def test_two_revisions_of_one_api_are_refused():
    with pytest.raises(ValueError):
        Objects("seed").cache(revisions=(Objects("seed").rev, Objects("v0.5").rev))


def test_service_events_reach_only_pools_and_routes_that_name_it(objs):
    cache = loaded(objs, objs.route("svc-route", pools=(), backends=[{"name": "epp", "port": 9002}]))
    svc = objs.service()
    pool = objs.pool_item()
    assert cache.apply("Service", "MODIFIED", modified(svc, metadata__labels={"a": "b"})) == set()
    assert cache.apply("Service", "MODIFIED", modified(svc, "3", spec__type="ExternalName")) == {
        pool, ("HTTPRoute", NS, "svc-route")}
    assert cache.apply("Service", "DELETED", svc) == {pool, ("HTTPRoute", NS, "svc-route")}
    assert (NS, "epp") not in cache.services
    assert cache.apply("Service", "ADDED", objs.service("nobody-uses")) == set()


@pytest.mark.parametrize("name", ["v1.6"])
def test_service_events_skip_pools_without_picker(name):
    objs = Objects(name)
    cache = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(no_picker=True))
    assert cache.apply("Service", "ADDED", objs.service()) == set()


def test_route_events_reach_the_route_and_old_and_new_pools(objs):
    cache = loaded(objs)
    route = objs.route(pools=("pool2",), generation=2)
    route["metadata"]["resourceVersion"] = "2"
    assert cache.apply("HTTPRoute", "MODIFIED", route) == {ROUTE, objs.pool_item(), objs.pool_item("pool2")}
    # A status-only change (same generation) concerns the route alone.
    assert cache.apply("HTTPRoute", "MODIFIED", modified(route, "3", status={"parents": []})) == {ROUTE}
    assert cache.apply("HTTPRoute", "DELETED", route) == {objs.pool_item("pool2")}


def test_an_event_seen_before_changes_nothing(objs):
    cache = loaded(objs)
    assert cache.apply(pool_kind(objs), "MODIFIED", objs.pool()) == set()


def test_gateway_events_fan_out_only_on_spec_changes(objs):
    cache = loaded(objs)
    gw = objs.gateway()
    pool = objs.pool_item()
    assert cache.apply("Gateway", "MODIFIED", modified(gw, status={"conditions": []})) == {GW}
    assert cache.apply("Gateway", "MODIFIED", modified(gw, "3", metadata__generation=2)) == {GW, ROUTE, pool}
    assert cache.apply("Gateway", "DELETED", gw) == {ROUTE, pool}


def test_gateway_in_another_namespace_fans_out_to_routes_and_pools(objs):
    cache = objs.loaded(objs.gateway_class(), objs.route(parents=({"name": "gw", "namespace": "gateways"},)),
                        objs.pool(), objs.service())
    gw = objs.gateway(ns="gateways")
    assert cache.apply("Gateway", "ADDED", gw) == {("Gateway", "gateways", "gw"), ROUTE, objs.pool_item()}


def test_gatewayclass_arrival_reaches_its_gateways(objs):
    cache = objs.loaded(objs.gateway(), objs.route(), objs.pool(), objs.service())
    assert cache.apply("GatewayClass", "ADDED", objs.gateway_class()) == {("GatewayClass", "", "ours"), GW,
                                                                        ROUTE, objs.pool_item()}
    assert cache.apply("GatewayClass", "ADDED", objs.gateway_class("theirs", "example.com/x")) == set()


def test_pool_arrival_reaches_routes_that_send_to_it(objs):
    cache = loaded(objs)
    assert cache.apply(pool_kind(objs), "ADDED", objs.pool("new")) == {objs.pool_item("new")}
    cache.apply("HTTPRoute", "ADDED", objs.route("r2", pools=("later",)))
    assert cache.apply(pool_kind(objs), "ADDED", objs.pool("later")) == {objs.pool_item("later"),
                                                                          ("HTTPRoute", NS, "r2")}


def test_relist_drops_what_is_gone(objs):
    cache = loaded(objs)
    items = cache.replace_all("Service", [])
    assert (NS, "epp") not in cache.services and objs.pool_item() in items
    items = cache.replace_all(pool_kind(objs), [])
    assert objs.pools(cache) == {} and ROUTE in items


def test_services_are_kept_slim(objs):
    cache = loaded(objs)
    assert cache.services[(NS, "epp")]["spec"] == {"type": "ClusterIP"}


def test_queue_deduplicates_and_keeps_first_time(seed):
    q = WorkQueue()
    pool = seed.pool_item()
    q.add([pool, ROUTE])
    q.add([pool])
    (item, _), (item2, _) = q.get(), q.get()
    assert (item, item2) == (pool, ROUTE)
    q.close()
    assert q.get() is None


def test_writes_once_then_nothing(objs):
    ctl, kube = controller_for(objs, objs.basic_objects())
    ctl.reconcile(objs.pool_item())
    assert len(kube.puts) == 1
    put = kube.puts[0]
    assert (put["apiVersion"], put["kind"]) == (f"{objs.f.group}/{objs.f.version}", "InferencePool")
    ctl.reconcile(objs.pool_item())  # the cache now holds the written object: nothing to do
    assert len(kube.puts) == 1


def test_conflict_rereads_and_keeps_the_concurrent_entry(objs):
    theirs = objs.foreign_entry("x")
    base = [objs.gateway_class(), objs.gateway(), objs.route(), objs.service()]
    on_server = objs.pool(status={objs.f.status_key: [theirs]})
    on_server["metadata"]["resourceVersion"] = "7"
    ctl, kube = controller_for(objs, base + [on_server], base + [objs.pool()])
    ctl.reconcile(objs.pool_item())
    assert [p["metadata"]["resourceVersion"] for p in kube.puts] == ["1", "7"]
    parents = objs.parents(kube.objects[objs.pool_item()]["status"])
    assert parents[0] == theirs and parents[1]["parentRef"]["name"] == "gw"


def test_both_apis_are_written_each_in_its_own_shape():
    x, ga = Objects("seed"), Objects("v1.6")
    route = x.route(backends=[ga.pool_backend("pool")])
    ctl, kube = controller_for(x, [x.gateway_class(), x.gateway(), route, x.pool(), ga.pool(), x.service()],
                               revisions=(x.rev, ga.rev))
    for o in (x, ga):
        ctl.reconcile(o.pool_item())
        st = kube.objects[o.pool_item()]["status"]
        assert set(st) == {o.f.status_key} and o.parents(st)[0]["parentRef"] == o.gw_ref()
    assert ctl._summary(x.pool_item()[0], kube.objects[x.pool_item()]["status"]).startswith("parent=gw[")
    assert ctl._summary(ga.pool_item()[0], kube.objects[ga.pool_item()]["status"]).startswith("parents=gw[")
    ctl.reconcile(ROUTE)
    rr = x.cond(kube.objects[ROUTE]["status"]["parents"][0], "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("True", "ResolvedRefs")


def test_replace_parent_list_patches_the_apis_own_list(objs):
    faults.activate(["replace-parent-list"])
    ctl, kube = controller_for(objs, objs.basic_objects())
    ctl.reconcile(objs.pool_item())
    assert [set(p["status"]) for p in kube.patches] == [{objs.f.status_key}]


def test_terminating_objects_are_not_written(objs):
    route = objs.route()
    route["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    ctl, kube = controller_for(objs, [objs.gateway_class(), objs.gateway(), route, objs.pool(), objs.service()])
    ctl.reconcile(ROUTE)
    assert kube.puts == []


def test_status_functions_do_not_mutate_their_input(objs):
    cache = objs.loaded(*objs.basic_objects())
    before = copy.deepcopy(cache.pools), copy.deepcopy(cache.routes)
    status.pool_status(objs.pools(cache)[(NS, "pool")], cache, objs.rev, [], "2025-01-01T00:00:00Z")
    status.route_status(cache.routes[(NS, "route")], cache, "2025-01-01T00:00:00Z")
    assert (cache.pools, cache.routes) == before
