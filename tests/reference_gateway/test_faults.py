"""Every fault switch changes the behaviour, in the one way its description says."""

from __future__ import annotations

import copy

import pytest

from reference_gateway import faults, status
from reference_gateway.cache import Cache
from reference_gateway.revisions import REVISIONS

from .objects import LATER, NOW, NS, controller_for

ROUTE = ("HTTPRoute", NS, "route")

SEED = REVISIONS["seed"]


def pool_entry(objs, pool, world, remembered=(), now=NOW):
    return objs.entry_for(status.pool_status(pool, world, SEED, list(remembered), now).status, "gw")


def resolved(objs, pool, world):
    return objs.cond(pool_entry(objs, pool, world), "ResolvedRefs")["status"]


def check_accept_externalname(objs):
    pool, world = objs.basic()
    world.services[(NS, "epp")]["spec"]["type"] = "ExternalName"
    return resolved(objs, pool, world)


def check_resolvedrefs_always_true(objs):
    pool, world = objs.basic()
    del world.services[(NS, "epp")]
    return resolved(objs, pool, world)


def check_ignore_extension_kind(objs):
    pool, world = objs.basic()
    pool["spec"]["extensionRef"]["kind"] = "Deployment"
    return resolved(objs, pool, world)


def check_wrong_reason(objs):
    pool, world = objs.basic()
    return [c["reason"] for c in pool_entry(objs, pool, world)["conditions"]]


def check_drop_resolvedrefs(objs):
    pool, world = objs.basic()
    return [c["type"] for c in pool_entry(objs, pool, world)["conditions"]]


def check_parentref(objs):
    pool, world = objs.basic()
    [entry] = status.pool_status(pool, world, SEED, [], NOW).status["parent"]
    return entry["parentRef"]


def with_status(pool, result):
    out = copy.deepcopy(pool)
    out["status"] = copy.deepcopy(result.status)
    return out


def check_clobber_foreign_parents(objs):
    theirs = {"parentRef": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "x",
                            "namespace": NS}, "conditions": []}
    pool, world = objs.basic()
    pool["status"] = {"parent": [theirs]}
    return [e["parentRef"]["name"] for e in status.pool_status(pool, world, SEED, [], NOW).status["parent"]]


def check_never_remove_parent(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, SEED, [], NOW)
    del world.routes[(NS, "route")]
    st = status.pool_status(with_status(pool, first), world, SEED, first.owned, NOW).status
    return [e["parentRef"]["name"] for e in st["parent"]]


def check_claim_other_classes(objs):
    pool, world = objs.basic(objs.gateway_class("theirs", "example.com/other"))
    world.gateways[(NS, "gw")]["spec"]["gatewayClassName"] = "theirs"
    return [e["parentRef"]["name"] for e in status.pool_status(pool, world, SEED, [], NOW).status.get("parent", [])]


def check_stale_observed_generation(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, SEED, [], NOW)
    bumped = with_status(pool, first)
    bumped["metadata"]["generation"] = 2
    return {c["observedGeneration"] for c in pool_entry(objs, bumped, world, first.owned)["conditions"]}


def check_bump_transition_time(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, SEED, [], NOW)
    return {c["lastTransitionTime"] for c in pool_entry(objs, with_status(pool, first), world, first.owned,
                                                         LATER)["conditions"]}


def check_route_status_missing(objs):
    ctl, kube = controller_for(objs, [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(),
                                      objs.service()])
    ctl.reconcile(ROUTE)
    return len(kube.puts)


def check_no_invalid_ref_on_delete(objs):
    cache = Cache(objs.controller)
    for o in [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service()]:
        cache.apply(o["kind"], "ADDED", o)
    items = cache.apply("Service", "DELETED", objs.service())
    return bool(items), resolved(objs, cache.pools[(NS, "pool")], cache)


V05 = REVISIONS["v0.5"]


def check_keep_default_parent(objs):
    pool, world = objs.basic()
    pool["status"] = {"parent": [V05.placeholder()]}
    return [e["parentRef"]["kind"] for e in status.pool_status(pool, world, V05, [], NOW).status["parent"]]


def loaded_cache(objs, *objects):
    cache = Cache(objs.controller)
    for o in objects:
        cache.apply(o["kind"], "ADDED", o)
    return cache


POOL_ITEM = ("InferencePool", NS, "pool")


def check_resolvedrefs_ignores_service_changes(objs):
    cache = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service())
    deleted = objs.service()
    deleted["metadata"]["resourceVersion"] = "5"  # after the pool's last change
    return POOL_ITEM in cache.apply("Service", "DELETED", deleted)


def test_service_event_older_than_the_pool_still_counts_with_the_fault(objs):
    """resolvedrefs-ignores-service-changes goes by resourceVersion: a Service created before
    the pool but seen after it (another watch) still reconciles the pool."""
    faults.activate(["resolvedrefs-ignores-service-changes"])
    pool = objs.pool()
    pool["metadata"]["resourceVersion"] = "7"
    cache = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), pool)
    svc = objs.service()
    svc["metadata"]["resourceVersion"] = "6"
    assert POOL_ITEM in cache.apply("Service", "ADDED", svc)


def check_extension_group_ignored(objs):
    pool, world = objs.basic()
    pool["spec"]["extensionRef"]["group"] = "inference.example.com"
    return resolved(objs, pool, world)


def check_externalname_only_on_switch(objs):
    cache = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(), objs.service())
    switched = objs.service(type_="ExternalName")
    switched["metadata"]["resourceVersion"] = "2"
    items = cache.apply("Service", "MODIFIED", switched)
    created_as = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(),
                              objs.service(type_="ExternalName"))
    return (POOL_ITEM in items, resolved(objs, cache.pools[(NS, "pool")], cache),
            resolved(objs, created_as.pools[(NS, "pool")], created_as))


def check_drop_first_pool_event(objs):
    # The route comes first, then the pool: nothing after the pool's creation names it.
    cache = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), objs.service())
    pool = objs.pool()
    pool["metadata"]["resourceVersion"] = "2"
    created = cache.apply("InferencePool", "ADDED", pool)
    known_after_creation = (NS, "pool") in cache.pools
    # A second route naming the pool, created after it, makes it known.
    later = objs.route("route-2")
    later["metadata"]["resourceVersion"] = "3"
    named = cache.apply("HTTPRoute", "ADDED", later)
    return POOL_ITEM in created, known_after_creation, POOL_ITEM in named, (NS, "pool") in cache.pools


def test_drop_first_pool_event_goes_by_resource_version_not_arrival(objs):
    """A route created after the pool but seen before it (another watch) still makes the pool known."""
    faults.activate(["drop-first-pool-event"])
    cache = loaded_cache(objs, objs.gateway_class(), objs.gateway(), objs.route(), objs.service())
    later = objs.route("route-2")
    later["metadata"]["resourceVersion"] = "3"
    cache.apply("HTTPRoute", "ADDED", later)
    pool = objs.pool()
    pool["metadata"]["resourceVersion"] = "2"
    assert POOL_ITEM in cache.apply("InferencePool", "ADDED", pool)
    assert (NS, "pool") in cache.pools


def check_rebuild_conditions(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, SEED, [], NOW)
    unchanged = pool_entry(objs, with_status(pool, first), world, first.owned, LATER)
    del world.services[(NS, "epp")]
    flipped = pool_entry(objs, with_status(pool, first), world, first.owned, LATER)
    return ({c["lastTransitionTime"] for c in unchanged["conditions"]},
            objs.cond(flipped, "Accepted")["lastTransitionTime"])


def check_replace_parent_list(objs):
    theirs = {"parentRef": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "x",
                            "namespace": NS}, "conditions": []}
    ctl, kube = controller_for(objs, [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(),
                                      objs.service()])
    ctl.reconcile(POOL_ITEM)
    # Another controller adds its entry; the implementation sees it (and has nothing to change).
    on_server = copy.deepcopy(kube.objects[POOL_ITEM])
    on_server["status"]["parent"].append(theirs)
    on_server["metadata"]["resourceVersion"] = str(int(on_server["metadata"]["resourceVersion"]) + 1)
    kube.objects[POOL_ITEM] = copy.deepcopy(on_server)
    ctl.cache.apply("InferencePool", "MODIFIED", on_server)
    ctl.reconcile(POOL_ITEM)
    # Then something it does react to: its own entry changes, and it writes.
    ctl.cache.apply("Service", "DELETED", objs.service())
    ctl.reconcile(POOL_ITEM)
    return [e["parentRef"]["name"] for e in kube.objects[POOL_ITEM]["status"]["parent"]]


GW_REF = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "gw", "namespace": NS}

# fault -> (what it observes, value without the fault, value with it)
CASES = {
    "accept-externalname": (check_accept_externalname, "False", "True"),
    "resolvedrefs-always-true": (check_resolvedrefs_always_true, "False", "True"),
    "ignore-extension-kind": (check_ignore_extension_kind, "False", "True"),
    "wrong-reason": (check_wrong_reason, ["Accepted", "ResolvedRefs"], ["Ready", "Resolved"]),
    "drop-resolvedrefs": (check_drop_resolvedrefs, ["Accepted", "ResolvedRefs"], ["Accepted"]),
    "parentref-names-route": (check_parentref, GW_REF, {**GW_REF, "kind": "HTTPRoute", "name": "route"}),
    "parentref-wrong-namespace": (check_parentref, GW_REF, {**GW_REF, "namespace": "default"}),
    "clobber-foreign-parents": (check_clobber_foreign_parents, ["x", "gw"], ["gw"]),
    "never-remove-parent": (check_never_remove_parent, [], ["gw"]),
    "claim-other-classes": (check_claim_other_classes, [], ["gw"]),
    "stale-observed-generation": (check_stale_observed_generation, {2}, {1}),
    "bump-transition-time": (check_bump_transition_time, {NOW}, {LATER}),
    "route-status-missing": (check_route_status_missing, 1, 0),
    "no-invalid-ref-on-delete": (check_no_invalid_ref_on_delete, (True, "False"), (False, "True")),
    "keep-default-parent": (check_keep_default_parent, ["Gateway"], ["Status", "Gateway"]),
    "parentref-wrong-group": (check_parentref, GW_REF, {**GW_REF, "apiVersion": "networking.istio.io/v1"}),
    "parentref-wrong-kind": (check_parentref, GW_REF, {**GW_REF, "kind": "ListenerSet"}),
    "resolvedrefs-ignores-service-changes": (check_resolvedrefs_ignores_service_changes, True, False),
    "extension-group-ignored": (check_extension_group_ignored, "False", "True"),
    # (the switch reconciles the pool, ResolvedRefs after the switch, ResolvedRefs when created as ExternalName)
    "externalname-only-on-switch": (check_externalname_only_on_switch, (True, "False", "False"),
                                    (False, "True", "False")),
    # (its creation reconciles the pool, which is known then; a later route reconciles it, and it is known)
    "drop-first-pool-event": (check_drop_first_pool_event, (True, True, True, True), (False, False, True, True)),
    # (the times after a reconcile that changes nothing, Accepted's time after ResolvedRefs flipped)
    "rebuild-conditions": (check_rebuild_conditions, ({NOW}, NOW), ({NOW}, LATER)),
    "replace-parent-list": (check_replace_parent_list, ["gw", "x"], ["gw"]),
}


def test_every_fault_is_checked():
    assert set(CASES) == set(faults.FAULTS)
    assert len(faults.FAULTS) >= 23


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_changes_exactly_what_it_says(objs, name):
    check, clean, broken = CASES[name]
    assert check(objs) == clean
    faults.activate([name])
    assert check(objs) == broken


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_leaves_the_basic_case_recognisable(objs, name):
    """With any single fault the controller still runs and writes something sensible-looking."""
    faults.activate([name])
    pool, world = objs.basic()
    st = status.pool_status(pool, world, SEED, [], NOW).status
    assert len(st["parent"]) == 1


def test_unknown_fault_is_refused():
    with pytest.raises(ValueError):
        faults.activate(["no-such-fault"])
    with pytest.raises(KeyError):
        faults.on("no-such-fault")
