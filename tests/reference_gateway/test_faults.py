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


def check_no_default_parent_restore(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, V05, [], NOW)
    del world.routes[(NS, "route")]
    st = status.pool_status(with_status(pool, first), world, V05, first.owned, NOW).status
    return [e["parentRef"]["kind"] for e in st["parent"]]


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
    "no-default-parent-restore": (check_no_default_parent_restore, ["Status"], []),
}


def test_every_fault_is_checked():
    assert set(CASES) == set(faults.FAULTS)
    assert len(faults.FAULTS) >= 13


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
