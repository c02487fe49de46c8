"""The pure status computations, on plain dicts (no cluster).

The generic tests take `objs` and run under each revision of objects.TESTED
(both APIs); the ones about one revision's own facts take `seed` or `v05`, or
a revision's `Objects` of their own.
"""

from __future__ import annotations

import copy

import pytest

from reference_gateway import status
from reference_gateway.revisions import REVISIONS, V1, V1ALPHA2, choose

from .objects import FLAVOURS, GA_GROUP, LATER, NOW, NS, PLACEHOLDER, X_GROUP, Objects


def pool_status(objs, pool, world, remembered=(), now=NOW):
    return status.pool_status(pool, world, objs.rev, list(remembered), now)


def applied(pool, result):
    """The pool as it reads back after the status was written."""
    out = copy.deepcopy(pool)
    out["status"] = copy.deepcopy(result.status)
    return out


# -- the revisions are what the API says ------------------------------------------------

@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_revision_data_matches_the_api(name):
    rev, f = REVISIONS[name], FLAVOURS[name]
    assert (rev.api.group, rev.api.version, rev.api.plural, rev.status_key) == \
        (f.group, f.version, "inferencepools", f.status_key)
    assert rev.api.resource.path("ns", "p", "status") == \
        f"/apis/{f.group}/{f.version}/namespaces/ns/inferencepools/p/status"
    assert (rev.ref_style, rev.status_placeholder, rev.route_not_accepted_reason, rev.controller_name,
            rev.picker_optional) == (f.ref_style, f.placeholder, f.not_accepted_reason, f.controller_name,
                                     f.picker_optional)
    if f.placeholder:
        assert rev.placeholder() == PLACEHOLDER


def test_each_api_reads_its_own_spec_fields():
    v1alpha2 = {"spec": {"targetPortNumber": 8000, "extensionRef": {"name": "epp", "portNumber": 9100}}}
    v1 = {"spec": {"targetPorts": [{"number": 8000}, {"number": 8001}],
                   "endpointPickerRef": {"name": "epp", "kind": "Service", "port": {"number": 9100}}}}
    assert V1ALPHA2.target_ports(v1alpha2) == [8000] and V1.target_ports(v1) == [8000, 8001]
    assert REVISIONS["seed"].picker_ref(v1alpha2) == ("", "Service", "epp", 9100)
    assert REVISIONS["v1.0"].picker_ref(v1) == ("", "Service", "epp", 9100)
    # Each API ignores the other's spelling.
    assert REVISIONS["seed"].picker_ref(v1).name == "" and REVISIONS["v1.6"].picker_ref(v1alpha2) is None
    # An unset port: the API says to infer 9002.
    assert REVISIONS["seed"].picker_ref({"spec": {"extensionRef": {"name": "epp"}}}).port == 9002


def test_at_most_one_revision_per_api_group():
    assert [r.name for r in choose(["v1.6", "seed"])] == ["v1.6", "seed"]
    assert [r.name for r in choose(["v0.5", "v0.5"])] == ["v0.5"]
    for names in (["seed", "v0.5"], ["v1.0", "v1.6"], ["nope"]):
        with pytest.raises(ValueError):
            choose(names)


# -- InferencePool: C1-C3, C5, C7, X1 -------------------------------------------

def test_pool_gets_accepted_and_resolved_entry_for_our_gateway(objs):
    pool, world = objs.basic()
    st = pool_status(objs, pool, world).status
    assert set(st) == {objs.f.status_key}
    [entry] = st[objs.f.status_key]
    assert entry["parentRef"] == objs.gw_ref("gw", NS)
    # controllerName only where the schema has it (a v1.0 or v1alpha2 schema would prune it: a write loop).
    assert entry.get("controllerName") == (objs.controller if objs.f.controller_name else None)
    assert [c["type"] for c in entry["conditions"]] == ["Accepted", "ResolvedRefs"]
    for c, reason in zip(entry["conditions"], ["Accepted", "ResolvedRefs"], strict=True):
        assert (c["status"], c["reason"], c["observedGeneration"], c["lastTransitionTime"]) == \
            ("True", reason, 1, NOW)
    assert "port 9002" in objs.cond(entry, "ResolvedRefs")["message"]
    assert "target port(s) 8000" in objs.cond(entry, "Accepted")["message"]


def test_explicit_port_is_reported(objs):
    pool = objs.pool(picker={"port": 9100}, ports=(8000, 8001) if objs.f.v1 else (8000,))
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, objs.service())
    entry = objs.entry_for(pool_status(objs, pool, world).status, "gw")
    assert "port 9100" in objs.cond(entry, "ResolvedRefs")["message"]
    assert f"{objs.rev.api.picker_field} resolves" in objs.cond(entry, "ResolvedRefs")["message"]
    if objs.f.v1:
        assert "target port(s) 8000, 8001" in objs.cond(entry, "Accepted")["message"]


@pytest.mark.parametrize("case", ["missing", "externalname", "kind", "group"])
def test_unresolvable_extension_ref(objs, case):
    picker = {"kind": "Deployment"} if case == "kind" else {"group": "apps"} if case == "group" else {}
    pool = objs.pool(picker=picker)
    svc_type = "ExternalName" if case == "externalname" else "ClusterIP"
    services = [] if case == "missing" else [objs.service(type_=svc_type)]
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, *services)
    entry = objs.entry_for(pool_status(objs, pool, world).status, "gw")
    assert objs.cond(entry, "Accepted")["status"] == "True"
    rr = objs.cond(entry, "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("False", "InvalidExtensionRef")
    assert rr["message"].startswith(objs.rev.api.picker_field)


@pytest.mark.parametrize("name", ["v1.6"])
def test_pool_without_picker_is_accepted_and_resolved(name):
    """C15 (v1.6): nothing to resolve is resolved; no Service is looked at."""
    objs = Objects(name)
    pool = objs.pool(no_picker=True)
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool)  # no Service at all
    entry = objs.entry_for(pool_status(objs, pool, world).status, "gw")
    assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
        ("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]
    assert "nothing to resolve" in objs.cond(entry, "ResolvedRefs")["message"]


@pytest.mark.parametrize("name", ["seed", "v0.5", "v1.0", "v1.4"])
def test_pool_without_picker_where_it_is_required_does_not_resolve(name):
    """The schema forbids it; should one come anyway, it names nothing."""
    objs = Objects(name)
    pool = objs.pool(no_picker=True)
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, objs.service())
    rr = objs.cond(objs.entry_for(pool_status(objs, pool, world).status, "gw"), "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("False", "InvalidExtensionRef")


# -- InferencePool: C4, C6 --------------------------------------------------------

def test_no_change_means_identical_status(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    again = pool_status(objs, applied(pool, first), world, remembered=first.owned, now=LATER)
    assert again.status == first.status


def test_transition_time_moves_only_with_status(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.services[(NS, "epp")]
    second = pool_status(objs, applied(pool, first), world, remembered=first.owned, now=LATER)
    entry = objs.entry_for(second.status, "gw")
    assert objs.cond(entry, "Accepted")["lastTransitionTime"] == NOW
    assert objs.cond(entry, "ResolvedRefs")["lastTransitionTime"] == LATER
    assert objs.cond(entry, "ResolvedRefs")["reason"] == "InvalidExtensionRef"


def test_observed_generation_follows_spec_changes(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    bumped = applied(pool, first)
    bumped["metadata"]["generation"] = 4
    entry = objs.entry_for(pool_status(objs, bumped, world, remembered=first.owned).status, "gw")
    assert {c["observedGeneration"] for c in entry["conditions"]} == {4}
    assert {c["lastTransitionTime"] for c in entry["conditions"]} == {NOW}


# -- InferencePool: C8-C12, C14 ----------------------------------------------------

def test_one_entry_per_gateway(objs):
    pool, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw2",)))
    st = pool_status(objs, pool, world).status
    assert [e["parentRef"]["name"] for e in objs.parents(st)] == ["gw", "gw2"]


def test_route_to_two_gateways_and_two_routes_to_one(objs):
    pool, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw", "gw2")))
    st = pool_status(objs, pool, world).status
    assert [e["parentRef"]["name"] for e in objs.parents(st)] == ["gw", "gw2"]
    assert "route, route2" in objs.cond(objs.entry_for(st, "gw"), "Accepted")["message"]


def test_gateway_in_another_namespace(objs):
    """C14: the route's parentRef names the Gateway's namespace, whose listener allows routes from All."""
    gw = objs.gateway("gw", ns="gateways", listeners=[
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}])
    route = objs.route(parents=({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw",
                                 "namespace": "gateways"},))
    pool = objs.pool()
    world = objs.world(objs.gateway_class(), gw, route, pool, objs.service())
    first = pool_status(objs, pool, world)
    [entry] = objs.parents(first.status)
    assert entry["parentRef"] == objs.gw_ref("gw", "gateways")
    assert objs.cond(entry, "Accepted")["status"] == "True"
    assert first.owned == [(objs.gw_ref("gw", "gateways"), ("gateways", "gw"))]
    # Recognised as ours on the next round (also after a restart), and removed with the route.
    assert pool_status(objs, applied(pool, first), world, now=LATER).status == first.status
    del world.routes[(NS, "route")]
    assert objs.parents(pool_status(objs, applied(pool, first), world).status) == objs.released
    # The same Gateway without the listener's permission: the route is not accepted there.
    same_ns_only = copy.deepcopy(gw)
    del same_ns_only["spec"]["listeners"][0]["allowedRoutes"]
    world.gateways[("gateways", "gw")] = same_ns_only
    world.routes[(NS, "route")] = route
    entries = objs.parents(pool_status(objs, pool, world).status)
    if objs.f.not_accepted_reason is None:
        assert entries == []
    else:
        assert [(objs.cond(e, "Accepted")["status"], objs.cond(e, "Accepted")["reason"]) for e in entries] == [
            ("False", objs.f.not_accepted_reason)]


def test_entry_removed_when_route_goes(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.routes[(NS, "route")]
    st = pool_status(objs, applied(pool, first), world, remembered=first.owned).status
    assert objs.parents(st) == objs.released


def test_remembered_entry_for_deleted_gateway_is_removed(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.gateways[(NS, "gw")]
    assert objs.parents(pool_status(objs, applied(pool, first), world, remembered=first.owned).status) == \
        objs.released


def test_entry_for_vanished_gateway_after_a_restart(objs):
    """After a restart nothing but controllerName says whether an entry for a vanished Gateway
    was ours: where entries carry it, the entry goes; elsewhere it is left alone."""
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.gateways[(NS, "gw")]
    st = pool_status(objs, applied(pool, first), world, remembered=[]).status
    if objs.f.controller_name:
        assert objs.parents(st) == objs.released
    else:
        assert st == first.status


def test_foreign_entries_are_kept_in_place(objs):
    theirs = objs.foreign_entry()
    pool = objs.pool(status={objs.f.status_key: [theirs]})
    world = objs.world(objs.gateway_class(), objs.gateway_class("theirs", "example.com/other"),
                       objs.gateway(), objs.gateway("other-gw", cls="theirs"), objs.route(), pool, objs.service())
    st = pool_status(objs, pool, world).status
    assert objs.parents(st)[0] == theirs
    assert [e["parentRef"]["name"] for e in objs.parents(st)] == ["other-gw", "gw"]
    del world.routes[(NS, "route")]
    assert objs.parents(pool_status(objs, applied(pool, pool_status(objs, pool, world)), world).status) == [theirs]


@pytest.mark.parametrize("name", ["v1.1", "v1.6"])
def test_entry_of_another_controller_for_our_gateway_is_theirs(name):
    """With controllerName, an entry another controller wrote is theirs even when it names our Gateway."""
    objs = Objects(name)
    theirs = objs.foreign_entry("gw")
    pool = objs.pool(status={"parents": [theirs]})
    world = objs.world(objs.gateway_class(), objs.gateway(), objs.route(), pool, objs.service())
    st = pool_status(objs, pool, world).status
    assert st["parents"][0] == theirs
    assert [e.get("controllerName") for e in st["parents"]] == ["example.com/other", objs.controller]
    assert not status.pool_has_entry_of(pool, world, objs.rev, [])


def test_gateway_of_another_class_gets_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway_class(), objs.gateway_class("theirs", "example.com/other"),
                       objs.gateway("gw", cls="theirs"), objs.route(), pool, objs.service())
    assert pool_status(objs, pool, world).status == {}


def test_gateway_of_a_missing_class_gets_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway("gw", cls="nonexistent"), objs.route(), pool, objs.service())
    assert pool_status(objs, pool, world).status == {}


def test_no_route_no_entry(objs):
    pool = objs.pool()
    world = objs.world(objs.gateway_class(), objs.gateway(), pool, objs.service(),
                       objs.route(pools=("another-pool",)))
    assert pool_status(objs, pool, world).status == {}


def test_route_in_another_namespace_does_not_count(objs):
    pool = objs.pool()
    route = objs.route(ns="elsewhere", parents=({"name": "gw", "namespace": NS},),
                       backends=[objs.pool_backend("pool", namespace=NS)], pools=())
    world = objs.world(objs.gateway_class(), objs.gateway(listeners=[
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]),
        route, pool, objs.service())
    assert pool_status(objs, pool, world).status == {}


def test_rejected_route(objs):
    """A Gateway that rejected the only route: no entry, or (v0.5, v1) Accepted False HTTPRouteNotAccepted."""
    pool, world = objs.basic()
    world.routes[(NS, "route")]["spec"]["parentRefs"][0]["sectionName"] = "nope"
    st = pool_status(objs, pool, world).status
    if objs.f.not_accepted_reason is None:
        assert st == {}
    else:
        acc = objs.cond(objs.entry_for(st, "gw"), "Accepted")
        assert (acc["status"], acc["reason"]) == ("False", objs.f.not_accepted_reason)


def test_terminating_route_does_not_count(objs):
    pool, world = objs.basic()
    world.routes[(NS, "route")]["metadata"]["deletionTimestamp"] = NOW
    assert pool_status(objs, pool, world).status == {}


def test_parent_limit_keeps_foreign_entries(objs):
    theirs = [objs.foreign_entry(f"other-{i}") for i in range(31)]
    pool = objs.pool(status={objs.f.status_key: theirs})
    _, world = objs.basic(objs.gateway("gw2"), objs.route("route2", parents=("gw2",)))
    objs.pools(world)[(NS, "pool")] = pool
    st = pool_status(objs, pool, world).status
    assert len(objs.parents(st)) == 32
    assert objs.parents(st)[:31] == theirs and objs.parents(st)[31]["parentRef"]["name"] == "gw"


def test_duplicate_entries_of_ours_collapse(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    doubled = applied(pool, first)
    doubled["status"][objs.f.status_key] *= 2
    assert pool_status(objs, doubled, world).status == first.status


# -- both APIs at once ----------------------------------------------------------------

def both_apis_world(x: Objects, ga: Objects, *routes):
    """A world watching both APIs, with a pool named "pool" in each, and `routes`."""
    return x.world(x.gateway_class(), x.gateway(), x.pool(), ga.pool(), x.service(), *routes,
                   revisions=(x.rev, ga.rev))


@pytest.mark.parametrize("x_name, ga_name", [("seed", "v1.6"), ("v0.5", "v1.0"), ("v0.5", "v1.4")])
def test_each_api_routes_to_its_own_pools(x_name, ga_name):
    x, ga = Objects(x_name), Objects(ga_name)
    only_x = both_apis_world(x, ga, x.route())
    assert x.parents(pool_status(x, x.pool(), only_x).status)
    assert pool_status(ga, ga.pool(), only_x).status == {}  # same name, other API: not routed to
    only_ga = both_apis_world(x, ga, ga.route())
    assert pool_status(x, x.pool(), only_ga).status == {}
    [entry] = ga.parents(pool_status(ga, ga.pool(), only_ga).status)
    assert entry["parentRef"] == ga.gw_ref() and objs_resolved(ga, entry)
    # One route to both: each pool gets its entry, in its own API's spelling.
    both = both_apis_world(x, ga, x.route(backends=[ga.pool_backend("pool")]))
    for o in (x, ga):
        st = pool_status(o, o.pool(), both).status
        assert set(st) == {o.f.status_key} and o.parents(st)[0]["parentRef"] == o.gw_ref()
    assert status.backend_problem(both.routes[(NS, "route")], both) is None


def objs_resolved(objs, entry) -> bool:
    return objs.cond(entry, "ResolvedRefs")["status"] == "True"


@pytest.mark.parametrize("watched, backend_group, reason", [
    ("seed", GA_GROUP, "InvalidKind"),  # v1 not watched: an unknown group, as any other
    ("v1.6", X_GROUP, "InvalidKind"),
    ("v1.6", GA_GROUP, "BackendNotFound"),
])
def test_route_to_pool_of_an_api_not_watched(watched, backend_group, reason):
    objs = Objects(watched)
    route = objs.route(pools=(), backends=[objs.pool_backend("missing", group=backend_group)])
    _, world = objs.basic()
    rr = objs.cond(status.route_status(route, world, NOW)["parents"][0], "ResolvedRefs")
    assert (rr["status"], rr["reason"]) == ("False", reason)


def test_route_resolves_pools_by_group():
    """A v1 pool named "pool" does not satisfy a v1alpha2 backendRef of that name, nor the other way."""
    x, ga = Objects("seed"), Objects("v1.6")
    for present, wanted in ((x, ga), (ga, x)):
        world = x.world(x.gateway_class(), x.gateway(), present.pool(), x.service(),
                        revisions=(x.rev, ga.rev))
        route = wanted.route()
        rr = wanted.cond(status.route_status(route, world, NOW)["parents"][0], "ResolvedRefs")
        assert (rr["status"], rr["reason"]) == ("False", "BackendNotFound")


# -- v0.5's placeholder -----------------------------------------------------------------

def test_v05_parent_ref_shape_and_placeholder(v05):
    pool = v05.pool(status=v05.fresh)
    _, world = v05.basic()
    v05.pools(world)[(NS, "pool")] = pool
    st = pool_status(v05, pool, world).status
    assert [e["parentRef"] for e in st["parent"]] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "namespace": NS}]
    # Not managed (no route): the placeholder stays.
    del world.routes[(NS, "route")]
    assert pool_status(v05, pool, world).status == pool["status"]


def test_v05_placeholder_restored_when_no_longer_managed(v05):
    pool, world = v05.basic()
    first = pool_status(v05, pool, world)
    del world.routes[(NS, "route")]
    assert pool_status(v05, applied(pool, first), world, first.owned).status == {"parent": [PLACEHOLDER]}
    # Restoring it is a change only once: the restored placeholder is nobody's entry.
    restored = applied(pool, pool_status(v05, applied(pool, first), world, first.owned))
    assert pool_status(v05, restored, world).status == restored["status"]


def test_v05_placeholder_not_restored_while_other_entries_remain(v05):
    theirs = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "x", "namespace": NS},
              "conditions": []}
    pool, world = v05.basic()
    first = pool_status(v05, pool, world)
    with_theirs = applied(pool, first)
    with_theirs["status"]["parent"].append(theirs)
    del world.routes[(NS, "route")]
    assert pool_status(v05, with_theirs, world, first.owned).status == {"parent": [theirs]}


@pytest.mark.parametrize("name", ["seed", "v1.0", "v1.6"])
def test_placeholder_never_written_by_revisions_without_one(name):
    objs = Objects(name)
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.routes[(NS, "route")]
    assert pool_status(objs, applied(pool, first), world, first.owned).status == {objs.f.status_key: []}
    # A Status/default entry means nothing special there: it is someone else's entry.
    odd = {**PLACEHOLDER, "parentRef": dict(PLACEHOLDER["parentRef"])}
    if objs.f.ref_style == "object":
        odd["parentRef"] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Status", "name": "default"}
    pool = objs.pool(status={objs.f.status_key: [odd]})
    objs.pools(world)[(NS, "pool")] = pool
    world.routes[(NS, "route")] = objs.route()
    assert objs.parents(pool_status(objs, pool, world).status)[0] == odd


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_revision_reads_back_what_it_writes(seed, name):
    rev = REVISIONS[name]
    gw = seed.gateway()
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
    ("missing-pool", "BackendNotFound"),
    ({"name": "missing-svc", "port": 80}, "BackendNotFound"),
    ({"group": "", "kind": "Service", "name": "epp", "namespace": "elsewhere", "port": 80}, "RefNotPermitted"),
    ("pool-elsewhere", "RefNotPermitted"),
    ({"group": "example.com", "kind": "Bucket", "name": "b"}, "InvalidKind"),
])
def test_route_backend_problems(objs, backend, reason):
    if backend == "missing-pool":
        backend = objs.pool_backend("missing")
    elif backend == "pool-elsewhere":
        backend = objs.pool_backend("pool", namespace="elsewhere")
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
def test_route_attachment_rules(seed, change, reason):
    route, gw = seed.route(), seed.gateway()
    change(route, gw)
    assert status.attachment(route, route["spec"]["parentRefs"][0], gw)[1] == reason


def test_route_attaches_to_gateway_of_another_namespace_that_allows_it(seed):
    route = seed.route(parents=({"name": "gw", "namespace": "gateways"},))
    gw = seed.gateway(ns="gateways", listeners=[
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}])
    assert status.attachment(route, route["spec"]["parentRefs"][0], gw) == (True, "Accepted",
                                                                           "Accepted by Gateway gateways/gw.")


def test_wildcard_hostnames_match(seed):
    route, gw = seed.route(hostnames=["a.example.com"]), seed.gateway()
    gw["spec"]["listeners"][0]["hostname"] = "*.example.com"
    assert status.attachment(route, route["spec"]["parentRefs"][0], gw)[0]


# -- Gateway and GatewayClass ---------------------------------------------------------

def test_gateway_is_accepted_but_not_programmed(seed):
    gw = seed.gateway(generation=3)
    gw["status"] = {"conditions": [{"type": "Accepted", "status": "Unknown", "reason": "Pending", "message": "",
                                    "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
    st = status.gateway_status(gw, NOW)
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in st["conditions"]] == [
        ("Accepted", "True", "Accepted", 3), ("Programmed", "False", "Pending", 3)]
    assert "listeners" not in st and "addresses" not in st


def test_gatewayclass_accepted(seed):
    st = status.gatewayclass_status(seed.gateway_class(), NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [("Accepted", "True", "Accepted")]
