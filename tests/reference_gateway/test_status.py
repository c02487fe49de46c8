"""The pure status computations, on plain dicts (no cluster)."""

from __future__ import annotations

import copy

import pytest

from reference_gateway import status
from reference_gateway.revisions import REVISIONS

from .objects import LATER, NOW, NS

SEED = REVISIONS["seed"]
V05 = REVISIONS["v0.5"]


def pool_status(pool, world, revision=SEED, remembered=(), now=NOW):
    return status.pool_status(pool, world, revision, list(remembered), now)


def applied(pool, result):
    """The pool as it reads back after the status was written."""
    out = copy.deepcopy(pool)
    out["status"] = copy.deepcopy(result.status)
    return out


# -- InferencePool: C1-C3, C5, C7, X1 -------------------------------------------

def test_pool_gets_accepted_and_resolved_entry_for_our_gateway(objs):
    pool, world = objs.basic()
    st = pool_status(pool, world).status
    [entry] = st["parent"]
    assert entry["parentRef"] == {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                                  "name": "gw", "namespace": NS}
    assert [c["type"] for c in entry["conditions"]] == ["Accepted", "ResolvedRefs"]
    for c, reason in zip(entry["conditions"], ["Accepted", "ResolvedRefs"], strict=True):
        assert (c["status"], c["reason"], c["observedGeneration"], c["lastTransitionTime"]) == \
            ("True", reason, 1, NOW)
    assert "port 9002" in objs.cond(entry, "ResolvedRefs")["message"]


def test_explicit_port_is_reported(objs):
    pool = objs.pool(ext={"portNumber": 9100})
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, objs.service())
    entry = objs.entry_for(pool_status(pool, world).status, "gw")
    assert "port 9100" in objs.cond(entry, "ResolvedRefs")["message"]


@pytest.mark.parametrize("case", ["missing", "externalname", "kind", "group"])
def test_unresolvable_extension_ref(objs, case):
    ext = {"kind": "Deployment"} if case == "kind" else {"group": "apps"} if case == "group" else {}
    pool = objs.pool(ext=ext)
    svc_type = "ExternalName" if case == "externalname" else "ClusterIP"
    services = [] if case == "missing" else [objs.service(type_=svc_type)]
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, *services)
    entry = objs.entry_for(pool_status(pool, world).status, "gw")
    assert objs.cond(entry, "Accepted")["status"] == "True"
    rr = objs.cond(entry, "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("False", "InvalidExtensionRef")


# -- InferencePool: C4, C6 --------------------------------------------------------

def test_no_change_means_identical_status(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    again = pool_status(applied(pool, first), world, remembered=first.owned, now=LATER)
    assert again.status == first.status


def test_transition_time_moves_only_with_status(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    del world.services[(NS, "epp")]
    second = pool_status(applied(pool, first), world, remembered=first.owned, now=LATER)
    entry = objs.entry_for(second.status, "gw")
    assert objs.cond(entry, "Accepted")["lastTransitionTime"] == NOW
    assert objs.cond(entry, "ResolvedRefs")["lastTransitionTime"] == LATER
    assert objs.cond(entry, "ResolvedRefs")["reason"] == "InvalidExtensionRef"


def test_observed_generation_follows_spec_changes(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    bumped = applied(pool, first)
    bumped["metadata"]["generation"] = 4
    entry = objs.entry_for(pool_status(bumped, world, remembered=first.owned).status, "gw")
    assert {c["observedGeneration"] for c in entry["conditions"]} == {4}
    assert {c["lastTransitionTime"] for c in entry["conditions"]} == {NOW}


# -- InferencePool: C8-C12 --------------------------------------------------------

def test_one_entry_per_gateway(objs):
    pool, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw2",)))
    st = pool_status(pool, world).status
    assert [e["parentRef"]["name"] for e in st["parent"]] == ["gw", "gw2"]


def test_route_to_two_gateways_and_two_routes_to_one(objs):
    pool, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw", "gw2")))
    st = pool_status(pool, world).status
    assert [e["parentRef"]["name"] for e in st["parent"]] == ["gw", "gw2"]
    assert "route, route2" in objs.cond(objs.entry_for(st, "gw"), "Accepted")["message"]


def test_entry_removed_when_route_goes(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    del world.routes[(NS, "route")]
    st = pool_status(applied(pool, first), world, remembered=first.owned).status
    assert st["parent"] == []


def test_remembered_entry_for_deleted_gateway_is_removed(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    del world.gateways[(NS, "gw")]
    assert pool_status(applied(pool, first), world, remembered=first.owned).status["parent"] == []


def test_unknown_gateway_entry_is_left_alone(objs):
    """After a restart nothing says whether an entry for a vanished Gateway was ours: keep it."""
    pool, world = objs.basic()
    first = pool_status(pool, world)
    del world.gateways[(NS, "gw")]
    assert pool_status(applied(pool, first), world, remembered=[]).status == first.status


def foreign_entry(name="other-gw", ns=NS):
    return {"parentRef": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": name,
                          "namespace": ns},
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                            "observedGeneration": 1, "lastTransitionTime": "2024-01-01T00:00:00Z"}]}


def test_foreign_entries_are_kept_in_place(objs):
    theirs = foreign_entry()
    pool = objs.pool(status={"parent": [theirs]})
    world = objs.world(objs.gateway_class(), objs.gateway_class("theirs", "example.com/other"),
                       objs.gateway(), objs.gateway("other-gw", cls="theirs"), objs.route(), pool, objs.service())
    st = pool_status(pool, world).status
    assert st["parent"][0] == theirs
    assert [e["parentRef"]["name"] for e in st["parent"]] == ["other-gw", "gw"]
    del world.routes[(NS, "route")]
    assert pool_status(applied(pool, pool_status(pool, world)), world).status["parent"] == [theirs]


def test_gateway_of_another_class_gets_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway_class(), objs.gateway_class("theirs", "example.com/other"),
                       objs.gateway("gw", cls="theirs"), objs.route(), pool, objs.service())
    assert pool_status(pool, world).status == {}


def test_gateway_of_a_missing_class_gets_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway("gw", cls="nonexistent"), objs.route(), pool, objs.service())
    assert pool_status(pool, world).status == {}


def test_no_route_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway_class(), objs.gateway(), pool, objs.service(),
                       objs.route(pools=("another-pool",)))
    assert pool_status(pool, world).status == {}


def test_route_in_another_namespace_does_not_count(objs):
    pool = objs.pool()
    route = objs.route(ns="elsewhere", parents=({"name": "gw", "namespace": NS},),
                       backends=[{"group": "inference.networking.x-k8s.io", "kind": "InferencePool",
                                  "name": "pool", "namespace": NS}], pools=())
    world = objs.world(objs.gateway_class(), objs.gateway(listeners=[
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]),
        route, pool, objs.service())
    assert pool_status(pool, world).status == {}


def test_rejected_route_does_not_count_in_seed(objs):
    pool, world = objs.basic()
    world.routes[(NS, "route")]["spec"]["parentRefs"][0]["sectionName"] = "nope"
    assert pool_status(pool, world).status == {}


def test_terminating_route_does_not_count(objs):
    pool, world = objs.basic()
    world.routes[(NS, "route")]["metadata"]["deletionTimestamp"] = NOW
    assert pool_status(pool, world).status == {}


def test_parent_limit_keeps_foreign_entries(objs):
    theirs = [foreign_entry(f"other-{i}") for i in range(31)]
    pool = objs.pool(status={"parent": theirs})
    _, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw2",)))
    world.pools[(NS, "pool")] = pool
    st = pool_status(pool, world).status
    assert len(st["parent"]) == 32
    assert st["parent"][:31] == theirs and st["parent"][31]["parentRef"]["name"] == "gw"


def test_duplicate_entries_of_ours_collapse(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world)
    doubled = applied(pool, first)
    doubled["status"]["parent"] *= 2
    assert pool_status(doubled, world).status == first.status


# -- revisions ------------------------------------------------------------------------

def test_v05_parent_ref_shape_and_placeholder(objs):
    placeholder = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Status", "name": "default"},
                   "conditions": [{"type": "Accepted", "status": "Unknown", "reason": "Pending",
                                   "message": "Waiting for controller", "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
    pool = objs.pool(status={"parent": [placeholder]})
    _, world = objs.basic()
    world.pools[(NS, "pool")] = pool
    st = pool_status(pool, world, V05).status
    assert [e["parentRef"] for e in st["parent"]] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "namespace": NS}]
    # Not managed (no route): the placeholder stays.
    del world.routes[(NS, "route")]
    assert pool_status(pool, world, V05).status == pool["status"]


def test_v05_placeholder_restored_when_no_longer_managed(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world, V05)
    del world.routes[(NS, "route")]
    assert pool_status(applied(pool, first), world, V05, first.owned).status == {"parent": [V05.placeholder()]}
    # Restoring it is a change only once: the restored placeholder is nobody's entry.
    restored = applied(pool, pool_status(applied(pool, first), world, V05, first.owned))
    assert pool_status(restored, world, V05).status == restored["status"]


def test_v05_placeholder_not_restored_while_other_entries_remain(objs):
    theirs = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "x", "namespace": NS},
              "conditions": []}
    pool, world = objs.basic()
    first = pool_status(pool, world, V05)
    with_theirs = applied(pool, first)
    with_theirs["status"]["parent"].append(theirs)
    del world.routes[(NS, "route")]
    assert pool_status(with_theirs, world, V05, first.owned).status == {"parent": [theirs]}


def test_placeholder_never_written_by_revisions_without_one(objs):
    pool, world = objs.basic()
    first = pool_status(pool, world, SEED)
    del world.routes[(NS, "route")]
    assert pool_status(applied(pool, first), world, SEED, first.owned).status == {"parent": []}


def test_v05_rejected_route_reports_not_accepted(objs):
    pool, world = objs.basic()
    world.routes[(NS, "route")]["spec"]["parentRefs"][0]["sectionName"] = "nope"
    entry = objs.entry_for(pool_status(pool, world, V05).status, "gw")
    acc = objs.cond(entry, "Accepted")
    assert (acc["status"], acc["reason"]) == ("False", "HTTPRouteNotAccepted")


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_revision_reads_back_what_it_writes(objs, name):
    rev = REVISIONS[name]
    gw = objs.gateway()
    assert rev.gateway_named(rev.parent_ref(gw), "elsewhere") == (NS, "gw")
    assert rev.gateway_named({**rev.parent_ref(gw), "kind": "HTTPRoute"}, NS) is None


# -- HTTPRoute: C13 ------------------------------------------------------------------

def route_entry(route, world, now=NOW):
    st = status.route_status(route, world, now)
    return [e for e in st.get("parents") or [] if e["controllerName"] == world.controller_name]


def test_route_accepted_and_resolved(objs):
    _, world = objs.basic()
    route = world.routes[(NS, "route")]
    [entry] = route_entry(route, world)
    assert entry["parentRef"] == route["spec"]["parentRefs"][0]
    assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
        ("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]


@pytest.mark.parametrize("backend, reason", [
    ({"group": "inference.networking.x-k8s.io", "kind": "InferencePool", "name": "missing"}, "BackendNotFound"),
    ({"name": "missing-svc", "port": 80}, "BackendNotFound"),
    ({"group": "", "kind": "Service", "name": "epp", "namespace": "elsewhere", "port": 80}, "RefNotPermitted"),
    ({"group": "example.com", "kind": "Bucket", "name": "b"}, "InvalidKind"),
])
def test_route_backend_problems(objs, backend, reason):
    route = objs.route(backends=[backend])
    _, world = objs.basic()
    world.routes[(NS, "route")] = route
    rr = objs.cond(route_entry(route, world)[0], "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("False", reason)


def test_route_service_backend_resolves(objs):
    route = objs.route(pools=(), backends=[{"group": "", "kind": "Service", "name": "epp", "port": 9002}])
    _, world = objs.basic()
    world.routes[(NS, "route")] = route
    assert objs.cond(route_entry(route, world)[0], "ResolvedRefs")["status"] == "True"


def test_route_foreign_parents_untouched_and_stale_ours_removed(objs):
    _, world = objs.basic()
    route = world.routes[(NS, "route")]
    theirs = {"parentRef": {"name": "x"}, "controllerName": "example.com/other", "conditions": []}
    stale = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "old"},
             "controllerName": world.controller_name, "conditions": []}
    route["status"] = {"parents": [theirs, stale]}
    st = status.route_status(route, world, NOW)
    assert st["parents"][0] == theirs
    assert [e["parentRef"]["name"] for e in st["parents"]] == ["x", "gw"]


def test_route_to_gateway_of_another_class_gets_nothing(objs):
    _, world = objs.basic(objs.gateway_class("theirs", "example.com/other"))
    world.gateways[(NS, "gw")]["spec"]["gatewayClassName"] = "theirs"
    assert status.route_status(world.routes[(NS, "route")], world, NOW) == {}


@pytest.mark.parametrize("change, reason", [
    (lambda r, g: r["spec"]["parentRefs"][0].update(sectionName="https"), "NoMatchingParent"),
    (lambda r, g: r["spec"]["parentRefs"][0].update(port=8080), "NoMatchingParent"),
    (lambda r, g: r["metadata"].update(namespace="elsewhere") or r["spec"]["parentRefs"][0].update(namespace=NS),
     "NotAllowedByListeners"),
    (lambda r, g: g["spec"]["listeners"][0].update(protocol="TCP"), "NotAllowedByListeners"),
    (lambda r, g: g["spec"]["listeners"][0].update(hostname="a.example.com") or r["spec"].update(
        hostnames=["b.example.com"]), "NoMatchingListenerHostname"),
])
def test_route_attachment_rules(objs, change, reason):
    route, gw = objs.route(), objs.gateway()
    change(route, gw)
    assert status.attachment(route, route["spec"]["parentRefs"][0], gw)[1] == reason


def test_wildcard_hostnames_match(objs):
    route, gw = objs.route(hostnames=["a.example.com"]), objs.gateway()
    gw["spec"]["listeners"][0]["hostname"] = "*.example.com"
    assert status.attachment(route, route["spec"]["parentRefs"][0], gw)[0]


# -- Gateway and GatewayClass ---------------------------------------------------------

def test_gateway_is_accepted_but_not_programmed(objs):
    gw = objs.gateway(generation=3)
    gw["status"] = {"conditions": [{"type": "Accepted", "status": "Unknown", "reason": "Pending", "message": "",
                                    "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
    st = status.gateway_status(gw, NOW)
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in st["conditions"]] == [
        ("Accepted", "True", "Accepted", 3), ("Programmed", "False", "Pending", 3)]
    assert "listeners" not in st and "addresses" not in st


def test_gatewayclass_accepted(objs):
    st = status.gatewayclass_status(objs.gateway_class(), NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [("Accepted", "True", "Accepted")]
