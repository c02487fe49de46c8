"""Every fault switch changes the behaviour, in the one way its description says, under both APIs.

Each check observes one thing for the revision of its `objs` (every revision
of objects.TESTED); CASES says what it sees without the fault and with it.
A fault meaningful only where the CRD has a placeholder changes nothing elsewhere.
"""

from __future__ import annotations

import copy

import pytest

from reference_gateway import faults, status

from .objects import DEFAULT_CONTROLLER, LATER, NOW, NS, Objects, controller_for

ROUTE = ("HTTPRoute", NS, "route")


def pool_status(objs, pool, world, remembered=(), now=NOW):
    return status.pool_status(pool, world, objs.rev, list(remembered), now)


def pool_entry(objs, pool, world, remembered=(), now=NOW):
    return objs.entry_for(pool_status(objs, pool, world, remembered, now).status, "gw")


def resolved(objs, pool, world):
    return objs.cond(pool_entry(objs, pool, world), "ResolvedRefs")["status"]


def with_status(pool, result):
    out = copy.deepcopy(pool)
    out["status"] = copy.deepcopy(result.status)
    return out


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
    objs.picker(pool)["kind"] = "Deployment"
    return resolved(objs, pool, world)


def check_wrong_reason(objs):
    pool, world = objs.basic()
    return [c["reason"] for c in pool_entry(objs, pool, world)["conditions"]]


def check_drop_resolvedrefs(objs):
    pool, world = objs.basic()
    return [c["type"] for c in pool_entry(objs, pool, world)["conditions"]]


def check_parentref(objs):
    pool, world = objs.basic()
    [entry] = objs.parents(pool_status(objs, pool, world).status)
    return entry["parentRef"]


def check_clobber_foreign_parents(objs):
    pool, world = objs.basic()
    pool["status"] = {objs.f.status_key: [objs.foreign_entry("x")]}
    return [e["parentRef"]["name"] for e in objs.parents(pool_status(objs, pool, world).status)]


def check_never_remove_parent(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.routes[(NS, "route")]
    st = pool_status(objs, with_status(pool, first), world, first.owned).status
    return [e["parentRef"]["name"] for e in objs.parents(st)]


def check_claim_other_classes(objs):
    pool, world = objs.basic(objs.gateway_class("theirs", "example.com/other"))
    world.gateways[(NS, "gw")]["spec"]["gatewayClassName"] = "theirs"
    return [e["parentRef"]["name"] for e in objs.parents(pool_status(objs, pool, world).status)]


def check_stale_observed_generation(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    bumped = with_status(pool, first)
    bumped["metadata"]["generation"] = 2
    return {c["observedGeneration"] for c in pool_entry(objs, bumped, world, first.owned)["conditions"]}


def check_bump_transition_time(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    return {c["lastTransitionTime"] for c in pool_entry(objs, with_status(pool, first), world, first.owned,
                                                         LATER)["conditions"]}


def check_hardcoded_controller_name(objs):
    """The entry's controllerName, and how many entries a second reconcile leaves (its own entry known)."""
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    again = pool_status(objs, with_status(pool, first), world, first.owned)
    return objs.entry_for(first.status, "gw").get("controllerName"), len(objs.parents(again.status))


def check_route_status_missing(objs):
    ctl, kube = controller_for(objs, objs.basic_objects())
    ctl.reconcile(ROUTE)
    return len(kube.puts)


def check_route_no_observed_generation(objs):
    """Which of the route's conditions, as written, carry observedGeneration."""
    ctl, kube = controller_for(objs, objs.basic_objects())
    ctl.reconcile(ROUTE)
    return [("observedGeneration" in c) for e in kube.puts[0]["status"]["parents"] for c in e["conditions"]]


def check_no_invalid_ref_on_delete(objs):
    cache = objs.loaded(*objs.basic_objects())
    items = cache.apply("Service", "DELETED", objs.service())
    return bool(items), resolved(objs, objs.pools(cache)[(NS, "pool")], cache)


def check_keep_default_parent(objs):
    """A fresh pool (with the CRD's placeholder where there is one) gets its first entry."""
    pool, world = objs.basic()
    pool["status"] = objs.fresh
    return [e["parentRef"]["kind"] for e in objs.parents(pool_status(objs, pool, world).status)]


def _versioned(obj, rv, generation=None):
    obj["metadata"]["resourceVersion"] = str(rv)
    if generation is not None:
        obj["metadata"]["generation"] = generation
    return obj


def check_resolvedrefs_ignores_service_changes(objs):
    """(ResolvedRefs after another writer's status update and the Service's deletion,
    ResolvedRefs once the pool's spec changed too)"""
    cache = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), _versioned(objs.service(), 2),
                        _versioned(objs.pool(), 3))
    cache.apply(objs.pool_item()[0], "MODIFIED", _versioned(objs.pool(), 4))  # a status write: same generation
    cache.apply("Service", "DELETED", _versioned(objs.service(), 5))
    after_delete = resolved(objs, objs.pools(cache)[(NS, "pool")], cache)
    cache.apply(objs.pool_item()[0], "MODIFIED", _versioned(objs.pool(), 6, generation=2))
    return after_delete, resolved(objs, objs.pools(cache)[(NS, "pool")], cache)


def test_service_seen_after_the_pool_still_counts_with_the_fault(objs):
    """resolvedrefs-ignores-service-changes goes by resourceVersion: a Service created before
    the pool but seen after it (another watch) resolves the pool's reference."""
    faults.activate(["resolvedrefs-ignores-service-changes"])
    cache = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), _versioned(objs.pool(), 7))
    assert objs.pool_item() in cache.apply("Service", "ADDED", _versioned(objs.service(), 6))
    assert resolved(objs, objs.pools(cache)[(NS, "pool")], cache) == "True"


def check_extension_group_ignored(objs):
    pool, world = objs.basic()
    objs.picker(pool)["group"] = "inference.example.com"
    return resolved(objs, pool, world)


def check_externalname_only_on_switch(objs):
    cache = objs.loaded(*objs.basic_objects())
    switched = objs.service(type_="ExternalName")
    switched["metadata"]["resourceVersion"] = "2"
    items = cache.apply("Service", "MODIFIED", switched)
    created_as = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(),
                             objs.service(type_="ExternalName"))
    return (objs.pool_item() in items, resolved(objs, objs.pools(cache)[(NS, "pool")], cache),
            resolved(objs, objs.pools(created_as)[(NS, "pool")], created_as))


def check_drop_first_pool_event(objs):
    # The route comes first, then the pool: nothing after the pool's creation names it.
    cache = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), objs.service())
    pool = objs.pool()
    pool["metadata"]["resourceVersion"] = "2"
    created = cache.apply(cache.resource_id(pool), "ADDED", pool)
    known_after_creation = (NS, "pool") in objs.pools(cache)
    # A second route naming the pool, created after it, makes it known.
    later = objs.route("route-2")
    later["metadata"]["resourceVersion"] = "3"
    named = cache.apply("HTTPRoute", "ADDED", later)
    return (objs.pool_item() in created, known_after_creation, objs.pool_item() in named,
            (NS, "pool") in objs.pools(cache))


def test_drop_first_pool_event_goes_by_resource_version_not_arrival(objs):
    """A route created after the pool but seen before it (another watch) still makes the pool known."""
    faults.activate(["drop-first-pool-event"])
    cache = objs.loaded(objs.gateway_class(), objs.gateway(), objs.route(), objs.service())
    later = objs.route("route-2")
    later["metadata"]["resourceVersion"] = "3"
    cache.apply("HTTPRoute", "ADDED", later)
    pool = objs.pool()
    pool["metadata"]["resourceVersion"] = "2"
    assert objs.pool_item() in cache.apply(cache.resource_id(pool), "ADDED", pool)
    assert (NS, "pool") in objs.pools(cache)


def check_rebuild_conditions(objs):
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    unchanged = pool_entry(objs, with_status(pool, first), world, first.owned, LATER)
    del world.services[(NS, "epp")]
    flipped = pool_entry(objs, with_status(pool, first), world, first.owned, LATER)
    return ({c["lastTransitionTime"] for c in unchanged["conditions"]},
            objs.cond(flipped, "Accepted")["lastTransitionTime"])


def check_replace_parent_list(objs):
    ctl, kube = controller_for(objs, objs.basic_objects())
    item = objs.pool_item()
    ctl.reconcile(item)
    # Another controller adds its entry; the implementation sees it (and has nothing to change).
    on_server = copy.deepcopy(kube.objects[item])
    objs.parents(on_server["status"]).append(objs.foreign_entry("x"))
    on_server["metadata"]["resourceVersion"] = str(int(on_server["metadata"]["resourceVersion"]) + 1)
    kube.objects[item] = copy.deepcopy(on_server)
    ctl.cache.apply(item[0], "MODIFIED", on_server)
    ctl.reconcile(item)
    # Then something it does react to: its own entry changes, and it writes.
    ctl.cache.apply("Service", "DELETED", objs.service())
    ctl.reconcile(item)
    return [e["parentRef"]["name"] for e in objs.parents(kube.objects[item]["status"])]


def _placeholder_only(clean, broken):
    """A fault that changes something only where the CRD has a placeholder."""
    return lambda objs: broken if objs.f.placeholder else clean


def _wrong_group(objs):
    if objs.f.ref_style == "object":
        return objs.gw_ref(apiVersion="networking.istio.io/v1")
    return objs.gw_ref(group="networking.istio.io")


# fault -> (what it observes, value without the fault, value with it); a value may be a
# function of `objs` (it differs between revisions).
# -- the data plane's faults: what Envoy is told ------------------------------------------------------

def _pool_cluster(objs, failure="FailClose", extra=()):
    from .test_dataplane import basic, build, tag
    config = build(objs, *basic(objs, failure=failure, extra=extra))
    return config, config.cluster(f"pool/{tag(objs)}/{NS}/pool")


def _lb(cluster):
    return cluster["load_balancing_policy"]["policies"][0]["typed_extension_config"]


def check_ignore_pick(objs):
    return _lb(_pool_cluster(objs)[1])["name"]


def check_failure_modes(objs):
    """(failure_mode_allow of a FailOpen pool, of a FailClose pool)"""
    from .test_dataplane import http_filters
    return tuple(http_filters(_pool_cluster(objs, failure)[0])[0]["typed_config"]["failure_mode_allow"]
                 for failure in ("FailOpen", "FailClose"))


def check_no_served_endpoint(objs):
    return "selected_host_key" in _lb(_pool_cluster(objs)[1])["typed_config"]


def check_route_to_not_ready(objs):
    from .test_dataplane import endpoints, pod
    return "10.244.0.20" in {ip for ip, _ in endpoints(_pool_cluster(objs, extra=[pod("nr", "10.244.0.20",
                                                                                      ready=False)])[1])}


def check_ignore_weights(objs):
    """The weights of a 70/30 rule's weighted clusters (a third backendRef weighs 0)."""
    from .test_dataplane import build, endpoint_slice, pod, routes, service
    rule = {"backendRefs": [objs.pool_backend("a", weight=70), objs.pool_backend("b", weight=30),
                            objs.pool_backend("c", weight=0)]}
    config = build(objs, objs.gateway_class(), objs.gateway(), objs.route(rules=[rule]), objs.pool("a"),
                   objs.pool("b"), objs.pool("c"), service(), endpoint_slice(), pod("m1", "10.244.0.21"))
    return [c["weight"] for c in routes(config)[0]["route"]["weighted_clusters"]["clusters"]]


def _ga_pool_cluster(**spec):
    """The pool cluster of a v1.6 pool (whatever revision `objs` is: the field exists there) with `spec` set."""
    from .test_dataplane import basic, build
    o = Objects("v1.6")
    pool = o.pool(ports=spec.pop("ports", (8000,)))
    pool["spec"].update(spec)
    return build(o, *basic(o)[:3], pool, *basic(o)[4:]).cluster(f"pool/v1/{NS}/pool")


def check_first_target_port_only(_objs):
    from .test_dataplane import endpoints
    return sorted({port for _, port in endpoints(_ga_pool_cluster(ports=(3000, 3002, 3004)))})


def check_h2c_as_http1(_objs):
    return "typed_extension_protocol_options" in _ga_pool_cluster(appProtocol="kubernetes.io/h2c")


def check_follow_externalname_picker(objs):
    """The endpoints of the picker cluster of a pool whose picker Service is of type ExternalName."""
    from .test_dataplane import basic, build, endpoints, service
    externalname = service(type_="ExternalName")
    config = build(objs, *basic(objs, picker_service=externalname))
    return [endpoints(c) for c in config.clusters if c["name"].startswith("epp/")]


def check_first_rule_only(objs):
    """The clusters of a route's two rules, to pool a and to pool b."""
    from .test_dataplane import build, endpoint_slice, routes, service
    rules = [{"matches": [{"path": {"type": "PathPrefix", "value": f"/{p}"}}], "backendRefs": [objs.pool_backend(p)]}
             for p in ("a", "b")]
    config = build(objs, objs.gateway_class(), objs.gateway(), objs.route(rules=rules), objs.pool("a"), objs.pool("b"),
                   service(), endpoint_slice())
    return sorted(r["route"]["cluster"].rsplit("/", 1)[-1] for r in routes(config))


def check_routes_on_every_gateway(objs):
    """The listeners that serve a route naming Gateway gw only, with a second Gateway beside it."""
    from .test_dataplane import GATEWAY, build, routes
    addresses = {"gw": GATEWAY, "other": "10.244.0.109"}
    config = build(objs, objs.gateway_class(), objs.gateway(), objs.gateway("other"), objs.route(), objs.pool(),
                   addresses={(NS, gw): address for gw, address in addresses.items()})
    return [gw for gw, address in addresses.items() if routes(config, f"{address}:80")]


CASES = {
    "accept-externalname": (check_accept_externalname, "False", "True"),
    "resolvedrefs-always-true": (check_resolvedrefs_always_true, "False", "True"),
    "ignore-extension-kind": (check_ignore_extension_kind, "False", "True"),
    "wrong-reason": (check_wrong_reason, ["Accepted", "ResolvedRefs"], ["Ready", "Resolved"]),
    "drop-resolvedrefs": (check_drop_resolvedrefs, ["Accepted", "ResolvedRefs"], ["Accepted"]),
    "parentref-names-route": (check_parentref, lambda o: o.gw_ref(),
                              lambda o: o.gw_ref(kind="HTTPRoute", name="route")),
    "parentref-wrong-namespace": (check_parentref, lambda o: o.gw_ref(), lambda o: o.gw_ref(namespace="default")),
    "clobber-foreign-parents": (check_clobber_foreign_parents, ["x", "gw"], ["gw"]),
    # (v0.5: the placeholder comes back instead)
    "never-remove-parent": (check_never_remove_parent, lambda o: [e["parentRef"]["name"] for e in o.released],
                            ["gw"]),
    "claim-other-classes": (check_claim_other_classes, [], ["gw"]),
    "stale-observed-generation": (check_stale_observed_generation, {2}, {1}),
    "bump-transition-time": (check_bump_transition_time, {NOW}, {LATER}),
    "route-status-missing": (check_route_status_missing, 1, 0),
    "route-no-observed-generation": (check_route_no_observed_generation, [True, True], [False, False]),
    "hardcoded-controller-name": (check_hardcoded_controller_name,
                                  lambda o: (DEFAULT_CONTROLLER if o.f.controller_name else None, 1),
                                  lambda o: (status.HARDCODED_CONTROLLER if o.f.controller_name else None, 1)),
    "no-invalid-ref-on-delete": (check_no_invalid_ref_on_delete, (True, "False"), (False, "True")),
    "keep-default-parent": (check_keep_default_parent, ["Gateway"], _placeholder_only(["Gateway"],
                                                                                      ["Status", "Gateway"])),
    "parentref-wrong-group": (check_parentref, lambda o: o.gw_ref(), _wrong_group),
    "parentref-wrong-kind": (check_parentref, lambda o: o.gw_ref(), lambda o: o.gw_ref(kind="ListenerSet")),
    "resolvedrefs-ignores-service-changes": (check_resolvedrefs_ignores_service_changes, ("False", "False"),
                                             ("True", "False")),
    "extension-group-ignored": (check_extension_group_ignored, "False", "True"),
    # (the switch reconciles the pool, ResolvedRefs after the switch, ResolvedRefs when created as ExternalName)
    "externalname-only-on-switch": (check_externalname_only_on_switch, (True, "False", "False"),
                                    (False, "True", "False")),
    # (its creation reconciles the pool, which is known then; a later route reconciles it, and it is known)
    "drop-first-pool-event": (check_drop_first_pool_event, (True, True, True, True), (False, False, True, True)),
    # (the times after a reconcile that changes nothing, Accepted's time after ResolvedRefs flipped)
    "rebuild-conditions": (check_rebuild_conditions, ({NOW}, NOW), ({NOW}, LATER)),
    "replace-parent-list": (check_replace_parent_list, ["gw", "x"], ["gw"]),
    "ignore-pick": (check_ignore_pick, "envoy.load_balancing_policies.override_host",
                    "envoy.load_balancing_policies.round_robin"),
    "swap-failure-modes": (check_failure_modes, (True, False), (False, True)),
    "fail-open-as-fail-close": (check_failure_modes, (True, False), (False, False)),
    "no-served-endpoint": (check_no_served_endpoint, True, False),
    "route-to-not-ready": (check_route_to_not_ready, False, True),
    "ignore-weights": (check_ignore_weights, [70, 30], [1, 1]),
    "first-target-port-only": (check_first_target_port_only, [3000, 3002, 3004], [3000]),
    "h2c-as-http1": (check_h2c_as_http1, True, False),
    "follow-externalname-picker": (check_follow_externalname_picker, [], [[("picker.example.com", 9002)]]),
    "first-rule-only": (check_first_rule_only, ["a", "b"], ["a", "a"]),
    "routes-on-every-gateway": (check_routes_on_every_gateway, ["gw"], ["gw", "other"]),
}
# Faults that change nothing on some revisions (no placeholder; no controllerName).
REVISION_LIMITED = {"keep-default-parent", "hardcoded-controller-name"}


def _value(v, objs):
    return v(objs) if callable(v) else v


def test_every_fault_is_checked():
    assert set(CASES) == set(faults.FAULTS)
    assert len(faults.FAULTS) >= 23


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_changes_exactly_what_it_says(objs, name):
    check, clean, broken = CASES[name]
    assert check(objs) == _value(clean, objs)
    faults.activate([name])
    assert check(objs) == _value(broken, objs)
    if name not in REVISION_LIMITED:
        assert _value(broken, objs) != _value(clean, objs)


@pytest.mark.parametrize("name", sorted(REVISION_LIMITED))
def test_revision_limited_faults_say_where_they_do_nothing(name):
    assert "changes nothing" in faults.FAULTS[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_leaves_the_basic_case_recognisable(objs, name):
    """With any single fault the controller still runs and writes something sensible-looking."""
    faults.activate([name])
    pool, world = objs.basic()
    assert len(objs.parents(pool_status(objs, pool, world).status)) == 1


def test_unknown_fault_is_refused():
    with pytest.raises(ValueError):
        faults.activate(["no-such-fault"])
    with pytest.raises(KeyError):
        faults.on("no-such-fault")
