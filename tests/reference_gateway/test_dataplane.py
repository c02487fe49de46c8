"""The reference gateway's data plane: the Envoy configuration it writes, on plain objects and through a real Envoy.

`reference_gateway/dataplane.py` translates Gateways, HTTPRoutes and InferencePools (both APIs) into
Envoy listeners and clusters. The unit tests check the translation on plain dicts: FailOpen and
FailClose, weights, an ExternalName picker never becoming a cluster, each API's field names, route
matching, hostnames, the Gateway's address and status. Every configuration they build is also handed
to `envoy --mode validate`. The last tests write the configuration into a real Envoy inside a network
sandbox, with backends on pod addresses and no endpoint picker at all: FailOpen serves through the
fallback, FailClose answers 500, an unresolvable picker 500, no route 404, weights split, and a
destination the pool does not hold is never followed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from conformance.traffic import netns
from conformance.traffic.envoy import CDS_FILE, LDS_FILE, Envoy, validate
from conformance.traffic.netns import Sandbox
from reference_gateway import dataplane, status
from reference_gateway.__main__ import parse_args
from reference_gateway.controller import Controller
from reference_gateway.dataplane import UNSERVED, AddressBook, Dataplane, Inventory, Options, translate

from ..traffic.test_envoy import CLIENT, start_backend
from .objects import NOW, NS, X_GROUP, FakeKube, Objects

GATEWAY = "10.244.0.100"
POD_A, POD_B, OUTSIDER, EPP = "10.244.0.5", "10.244.0.6", "10.244.0.7", "10.244.0.9"
NEEDS_SANDBOX = pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))


# -- objects the data plane reads besides the status cache's ------------------------------------------

def pod(name, ip, labels=None, ready=True, ns=NS, deleting=False):
    md = {"name": name, "namespace": ns, "labels": {"app": "model"} if labels is None else labels}
    if deleting:
        md["deletionTimestamp"] = "2025-03-01T12:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def service(name="epp", ns=NS, type_="ClusterIP", ports=(("grpc", 9002, 9002),)):
    """A Service with its ports ((name, port, targetPort), ...); an ExternalName one has none."""
    sp = {"type": type_}
    if type_ == "ExternalName":
        sp["externalName"] = "picker.example.com"
    else:
        sp["ports"] = [{"name": n, "port": p, "targetPort": t} for n, p, t in ports]
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": sp}


def endpoint_slice(service_name="epp", addresses=(EPP,), port=9002, port_name="grpc", ns=NS, ready=True):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service_name}-x1", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a in addresses]}


def inventory(*objs) -> Inventory:
    inv = Inventory()
    for o in objs:
        inv.add(o)
    return inv


def options(tmp: Path | None = None, **kw) -> Options:
    return Options(tmp or Path("unused"), **kw)


def world_of(o: Objects, *objs):
    """The status cache's world: every object but Pods and EndpointSlices (Services slimmed, as it keeps them)."""
    kept = [x if x["kind"] != "Service" else {**x, "spec": {"type": x["spec"]["type"]}}
            for x in objs if x["kind"] not in ("Pod", "EndpointSlice")]
    return o.world(*kept)


def build(o: Objects, *objs, addresses=None, **opts) -> dataplane.Config:
    """The Envoy configuration for these objects, the Gateway gw at GATEWAY unless told otherwise."""
    inv = inventory(*(x for x in objs if x["kind"] in ("Pod", "EndpointSlice", "Service")))
    addresses = {(NS, "gw"): GATEWAY} if addresses is None else addresses
    return translate(world_of(o, *objs), inv, addresses, options(**opts))


def basic(o: Objects, failure="FailClose", picker_service=None, extra=(), pool_kw=None):
    """Our class and Gateway, a route to the pool, the pool, its picker Service and EndpointSlice, two pods."""
    pool = o.pool(picker={"failureMode": failure}, **(pool_kw or {}))
    return [o.gateway_class(), o.gateway(), o.route(), pool, picker_service or service(), endpoint_slice(),
            pod("m1", POD_A), pod("m2", POD_B), *extra]


def routes(config: dataplane.Config, listener=f"{GATEWAY}:80") -> list[dict]:
    """Every Envoy route of the listener, vhost after vhost."""
    hcm = config.listener(listener)["filter_chains"][0]["filters"][0]["typed_config"]
    return [r for vh in hcm["route_config"]["virtual_hosts"] for r in vh["routes"]]


def vhosts(config: dataplane.Config, listener=f"{GATEWAY}:80") -> dict[str, list[str]]:
    hcm = config.listener(listener)["filter_chains"][0]["filters"][0]["typed_config"]
    return {vh["name"]: [r["name"] for r in vh["routes"]] for vh in hcm["route_config"]["virtual_hosts"]}


def http_filters(config: dataplane.Config, listener=f"{GATEWAY}:80") -> list[dict]:
    return config.listener(listener)["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]


def endpoints(cluster: dict) -> list[tuple[str, int]]:
    return [(e["endpoint"]["address"]["socket_address"]["address"], e["endpoint"]["address"]["socket_address"]
             ["port_value"]) for group in cluster["load_assignment"]["endpoints"] for e in group["lb_endpoints"]]


def tag(o: Objects) -> str:
    return "v1" if o.f.v1 else "v1alpha2"


@pytest.fixture(scope="module")
def validation_sandbox():
    """A sandbox for `envoy --mode validate`: the configurations name pod addresses."""
    if netns.available() is not None:
        yield None
        return
    with Sandbox(stop_timeout=2) as sb:
        yield sb


@pytest.fixture
def valid(validation_sandbox):
    """Hands a configuration a test built to `envoy --mode validate` (where a sandbox can be made), and
    returns it: every configuration the unit tests check is one Envoy accepts."""
    def keep_(config: dataplane.Config) -> dataplane.Config:
        if validation_sandbox is not None:
            validate(config.listeners, config.clusters, sandbox=validation_sandbox)
        return config
    return keep_


# -- pools -------------------------------------------------------------------------------------------

def test_pool_cluster_holds_the_ready_selected_pods_on_every_target_port(valid):
    o = Objects("v1.4")
    objs = basic(o, pool_kw={"ports": (8000, 8001)}, extra=[
        pod("not-ready", "10.244.0.20", ready=False), pod("other-app", "10.244.0.21", labels={"app": "other"}),
        pod("elsewhere", "10.244.0.22", ns="ns2"), pod("deleting", "10.244.0.23", deleting=True),
        pod("no-ip", "")])
    config = valid(build(o, *objs))
    cluster = config.cluster(f"pool/v1/{NS}/pool")
    assert endpoints(cluster) == [(POD_A, 8000), (POD_A, 8001), (POD_B, 8000), (POD_B, 8001)]
    policy = cluster["load_balancing_policy"]["policies"][0]["typed_extension_config"]
    assert policy["name"] == "envoy.load_balancing_policies.override_host"
    lb = policy["typed_config"]
    assert lb["override_host_sources"] == [
        {"metadata": {"key": "envoy.lb", "path": [{"key": "x-gateway-destination-endpoint"}]}},
        {"header": "x-gateway-destination-endpoint"}]
    assert lb["selected_host_key"] == {"key": "envoy.lb", "path": [{"key": "x-gateway-destination-endpoint-served"}]}
    assert lb["fallback_policy"]["policies"][0]["typed_extension_config"]["name"] == \
        "envoy.load_balancing_policies.round_robin"
    assert cluster["type"] == "STATIC"  # never ORIGINAL_DST: only the pool's own endpoints can be reached


def test_v1alpha2_selector_and_target_port(valid):
    o = Objects("seed")
    config = valid(build(o, *basic(o, pool_kw={"ports": (8080,)})))
    assert endpoints(config.cluster(f"pool/v1alpha2/{NS}/pool")) == [(POD_A, 8080), (POD_B, 8080)]


@pytest.mark.parametrize("revision", ["seed", "v0.5", "v1.0", "v1.6"])
@pytest.mark.parametrize("failure", ["FailOpen", "FailClose", None])
def test_failure_mode_becomes_failure_mode_allow(revision, failure, valid):
    o = Objects(revision)
    objs = basic(o, failure=failure or "FailClose")
    if failure is None:  # left out: the API's default, FailClose
        del o.picker(objs[3])["failureMode"]
    config = valid(build(o, *objs))
    [ext_proc, router] = http_filters(config)
    assert router["name"] == "envoy.filters.http.router"
    assert ext_proc["name"] == f"ext_proc/{tag(o)}/{NS}/pool" and ext_proc["disabled"] is True
    xp = ext_proc["typed_config"]
    assert xp["failure_mode_allow"] is (failure == "FailOpen")
    assert xp["grpc_service"]["envoy_grpc"]["cluster_name"] == f"epp/{tag(o)}/{NS}/pool"
    assert xp["processing_mode"] == {
        "request_header_mode": "SEND", "response_header_mode": "SEND",
        "request_body_mode": "FULL_DUPLEX_STREAMED", "response_body_mode": "FULL_DUPLEX_STREAMED",
        "request_trailer_mode": "SEND", "response_trailer_mode": "SEND"}
    assert xp["metadata_options"] == {"forwarding_namespaces": {"untyped": ["envoy.lb"]},
                                      "receiving_namespaces": {"untyped": ["envoy.lb"]}}
    assert xp["route_cache_action"] == "RETAIN"
    # The route to the pool switches the pool's filter on; no other route does.
    [route] = routes(config)
    assert route["route"]["cluster"] == f"pool/{tag(o)}/{NS}/pool"
    assert list(route["typed_per_filter_config"]) == [ext_proc["name"]]


def test_tls_to_the_picker(valid):
    o = Objects("v1.0")
    config = valid(build(o, *basic(o), epp_tls=True))
    epp = config.cluster(f"epp/v1/{NS}/pool")
    assert epp["transport_socket"]["name"] == "envoy.transport_sockets.tls"
    assert "transport_socket" not in build(o, *basic(o)).cluster(f"epp/v1/{NS}/pool")


@pytest.mark.parametrize("revision,picker,ports,expected", [
    # v1alpha2 extensionRef.portNumber; left out, 9002 (the API's default)
    ("seed", {}, [("grpc", 9002, 9102)], 9102),
    ("seed", {"port": 9500}, [("other", 9002, 9102), ("grpc", 9500, 9600)], 9600),
    # v1 endpointPickerRef.port.number
    ("v1.0", {"port": 9500}, [("other", 9002, 9102), ("grpc", 9500, 9600)], 9600),
    ("v1.6", {}, [("grpc", 9002, 9002)], 9002),
])
def test_picker_port_field_of_each_api(revision, picker, ports, expected, valid):
    """The picker port names a port of the Service; that port's EndpointSlice port (by name) is where
    the EPP listens."""
    o = Objects(revision)
    pool = o.pool(picker=picker)
    ref = o.picker(pool)
    if o.f.v1:
        assert ref["port"] == {"number": picker.get("port", 9002)} and "portNumber" not in ref
    else:
        assert ref.get("portNumber") == picker.get("port") and "port" not in ref
    slices = [endpoint_slice(port=t, port_name=n) for n, _, t in ports]
    for i, sl in enumerate(slices):
        sl["metadata"]["name"] += f"-{i}"
    config = valid(build(o, o.gateway_class(), o.gateway(), o.route(), pool, service(ports=ports), *slices,
                        pod("m1", POD_A)))
    assert endpoints(config.cluster(f"epp/{tag(o)}/{NS}/pool")) == [(EPP, expected)]
    grpc = http_filters(config)[0]["typed_config"]["grpc_service"]["envoy_grpc"]
    assert grpc["authority"] == f"epp.{NS}.svc:{picker.get('port', 9002)}"


def test_picker_endpoints_are_the_ready_ones(valid):
    o = Objects("v1.0")
    slice_ = endpoint_slice(addresses=(EPP, "10.244.0.10"))
    slice_["endpoints"][1]["conditions"]["ready"] = False
    config = valid(build(o, *basic(o)[:5], slice_))
    assert endpoints(config.cluster(f"epp/v1/{NS}/pool")) == [(EPP, 9002)]


def test_a_picker_without_endpoints_is_an_empty_cluster(valid):
    """Upstream's FailOpen test empties the picker Service's EndpointSlices: the EPP is then unavailable."""
    o = Objects("v1.0")
    objs = [x for x in basic(o, failure="FailOpen") if x["kind"] != "EndpointSlice"]
    config = valid(build(o, *objs))
    assert endpoints(config.cluster(f"epp/v1/{NS}/pool")) == []
    assert http_filters(config)[0]["typed_config"]["failure_mode_allow"] is True


@pytest.mark.parametrize("revision", ["seed", "v1.6"])
def test_externalname_picker_is_never_a_cluster(revision, valid):
    """The API: implementations MUST NOT support ExternalName Services. Nothing in Envoy's configuration
    leads there: no picker cluster, no ext_proc filter, and requests to the pool get 500."""
    o = Objects(revision)
    # Even an EndpointSlice labelled with the ExternalName Service's name is not followed.
    objs = basic(o, failure="FailOpen", picker_service=service(type_="ExternalName"))
    config = valid(build(o, *objs))
    assert [c["name"] for c in config.clusters] == []
    assert [f["name"] for f in http_filters(config)] == ["envoy.filters.http.router"]
    [route] = routes(config)
    assert route["route"]["cluster"] == UNSERVED and "typed_per_filter_config" not in route
    assert route["route"]["cluster_not_found_response_code"] == "INTERNAL_SERVER_ERROR"
    text = json.dumps([config.listeners, config.clusters])
    assert "picker.example.com" not in text and EPP not in text


@pytest.mark.parametrize("picker,services", [
    ({"kind": "Deployment", "group": "apps"}, [service()]),  # not a Service
    ({}, []),  # the Service does not exist
])
def test_unresolvable_picker_is_500(picker, services, valid):
    o = Objects("v1.0")
    pool = o.pool(picker=picker)
    config = valid(build(o, o.gateway_class(), o.gateway(), o.route(), pool, *services, endpoint_slice(),
                        pod("m1", POD_A)))
    assert routes(config)[0]["route"]["cluster"] == UNSERVED
    assert config.clusters == []


def test_v1_6_pool_without_picker_routes_to_its_pods(valid):
    o = Objects("v1.6")
    pool = o.pool(no_picker=True)
    config = valid(build(o, o.gateway_class(), o.gateway(), o.route(), pool, pod("m1", POD_A)))
    assert [f["name"] for f in http_filters(config)] == ["envoy.filters.http.router"]
    assert [c["name"] for c in config.clusters] == [f"pool/v1/{NS}/pool"]
    assert "typed_per_filter_config" not in routes(config)[0]


def test_h2c_pool_is_reached_over_http2(valid):
    o = Objects("v1.4")
    pool = o.pool()
    pool["spec"]["appProtocol"] = "kubernetes.io/h2c"
    config = valid(build(o, *basic(o)[:3], pool, *basic(o)[4:]))
    opts = config.cluster(f"pool/v1/{NS}/pool")["typed_extension_protocol_options"]
    assert "http2_protocol_options" in opts["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"][
        "explicit_http_config"]
    assert "typed_extension_protocol_options" not in build(o, *basic(o)).cluster(f"pool/v1/{NS}/pool")


def test_both_apis_at_once_stay_apart(valid):
    x, ga = Objects("v0.5"), Objects("v1.4")
    revisions = (x.rev, ga.rev)
    px, pga = x.pool("px"), ga.pool("pga")
    route = x.route(rules=[{"matches": [{"path": {"type": "PathPrefix", "value": "/x"}}],
                            "backendRefs": [x.pool_backend("px")]},
                           {"matches": [{"path": {"type": "PathPrefix", "value": "/ga"}}],
                            "backendRefs": [ga.pool_backend("pga")]}])
    world = x.world(x.gateway_class(), x.gateway(), route, px, pga, x.service(), revisions=revisions)
    inv = inventory(service(), endpoint_slice(), pod("m1", POD_A))
    config = valid(translate(world, inv, {(NS, "gw"): GATEWAY}, options()))
    assert {r["route"]["cluster"] for r in routes(config)} == {f"pool/v1alpha2/{NS}/px", f"pool/v1/{NS}/pga"}
    assert [f["name"] for f in http_filters(config)][:2] == [f"ext_proc/v1/{NS}/pga", f"ext_proc/v1alpha2/{NS}/px"]


# -- routes ------------------------------------------------------------------------------------------

def test_weights_split_across_pools_each_with_its_own_picker(valid):
    o = Objects("v1.0")
    rule = {"backendRefs": [o.pool_backend("a", weight=70), o.pool_backend("b", weight=30),
                            o.pool_backend("c", weight=0)]}
    objs = [o.gateway_class(), o.gateway(), o.route(rules=[rule]), o.pool("a"), o.pool("b"), o.pool("c"),
            service(), endpoint_slice(), pod("m1", POD_A)]
    config = valid(build(o, *objs))
    [route] = routes(config)
    weighted = route["route"]["weighted_clusters"]["clusters"]
    assert [(c["name"], c["weight"]) for c in weighted] == [(f"pool/v1/{NS}/a", 70), (f"pool/v1/{NS}/b", 30)]
    assert [list(c["typed_per_filter_config"]) for c in weighted] == [[f"ext_proc/v1/{NS}/a"], [f"ext_proc/v1/{NS}/b"]]
    assert "typed_per_filter_config" not in route  # each pool's picker only for its own share
    assert f"pool/v1/{NS}/c" not in [c["name"] for c in config.clusters]


def test_all_weights_zero_or_no_backends_is_500(valid):
    o = Objects("seed")
    rules = [{"matches": [{"path": {"value": "/zero"}}], "backendRefs": [o.pool_backend("pool", weight=0)]},
             {"matches": [{"path": {"value": "/none"}}]}]
    config = valid(build(o, *basic(o)[:2], o.route(rules=rules), *basic(o)[3:]))
    assert [r.get("direct_response") for r in routes(config)] == [{"status": 500}, {"status": 500}]


def test_backends_that_cannot_be_served_are_500(valid):
    o = Objects("v1.0")
    rule = {"backendRefs": [
        o.pool_backend("pool", weight=1),
        o.pool_backend("missing", weight=1),
        o.pool_backend("pool", weight=1, namespace="ns2"),  # another namespace: no ReferenceGrant is read
        {"group": "example.com", "kind": "Thing", "name": "x", "weight": 1},
        o.pool_backend("pool", group=X_GROUP, weight=1),  # an API not watched
        {"name": "ext", "port": 80, "weight": 1},  # an ExternalName Service
        {"name": "svc", "port": 80, "weight": 1},  # a Service: served from its EndpointSlices
    ]}
    objs = [*basic(o)[:2], o.route(rules=[rule]), *basic(o)[3:], service("ext", type_="ExternalName"),
            service("svc", ports=(("http", 80, 8080),)),
            endpoint_slice("svc", addresses=(POD_B,), port=8080, port_name="http")]
    config = valid(build(o, *objs))
    names = [c["name"] for c in routes(config)[0]["route"]["weighted_clusters"]["clusters"]]
    assert names == [f"pool/v1/{NS}/pool", *[UNSERVED] * 5, f"service/{NS}/svc/80"]
    assert endpoints(config.cluster(f"service/{NS}/svc/80")) == [(POD_B, 8080)]
    assert config.cluster(UNSERVED) is None


def test_matches_and_their_precedence(valid):
    o = Objects("v1.0")
    b = [o.pool_backend("pool")]
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/v1/"}}], "backendRefs": b},
        {"matches": [{"path": {"type": "Exact", "value": "/v1/completions"}}], "backendRefs": b},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/v1/chat"},
                      "headers": [{"name": "X-Model", "value": "a"}, {"type": "RegularExpression",
                                                                        "name": "x-tier", "value": "gold|silver"}],
                      "queryParams": [{"name": "debug", "value": "1"}], "method": "POST"}], "backendRefs": b},
        {"matches": [{"path": {"type": "RegularExpression", "value": "/v[0-9]+/models"}}], "backendRefs": b},
        {"backendRefs": b},  # no match: every path
    ]
    config = valid(build(o, *basic(o)[:2], o.route(rules=rules), *basic(o)[3:]))
    got = [(r["name"].split("/", 2)[2], r["match"]) for r in routes(config)]
    assert got == [
        ("rule1/match0", {"path": "/v1/completions"}),
        ("rule2/match0", {"path_separated_prefix": "/v1/chat", "headers": [
            {"name": "x-model", "string_match": {"exact": "a"}},
            {"name": "x-tier", "string_match": {"safe_regex": {"regex": "gold|silver"}}},
            {"name": ":method", "string_match": {"exact": "POST"}}],
            "query_parameters": [{"name": "debug", "string_match": {"exact": "1"}}]}),
        ("rule0/match0", {"path_separated_prefix": "/v1"}),  # a prefix matches whole path elements
        ("rule4/match0", {"prefix": "/"}),
        ("rule3/match0", {"safe_regex": {"regex": "/v[0-9]+/models"}}),
    ]


def test_equal_matches_go_to_the_oldest_route(valid):
    o = Objects("v1.0")
    old, new = o.route("old"), o.route("new")
    old["metadata"]["creationTimestamp"] = "2025-01-01T00:00:00Z"
    new["metadata"]["creationTimestamp"] = "2025-02-01T00:00:00Z"
    config = valid(build(o, *basic(o)[:2], new, old, *basic(o)[3:]))
    assert [r["name"] for r in routes(config)] == [f"{NS}/old/rule0/match0", f"{NS}/new/rule0/match0"]


def test_hostnames_of_routes_and_listeners(valid):
    o = Objects("seed")
    gw = o.gateway(listeners=[{"name": "any", "port": 80, "protocol": "HTTP"},
                              {"name": "wild", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com"}])
    named = o.route("named", hostnames=["a.example.com", "other.test"])
    plain = o.route("plain")
    config = valid(build(o, o.gateway_class(), gw, named, plain, *basic(o)[3:]))
    assert vhosts(config) == {"*": [f"{NS}/plain/rule0/match0"], "a.example.com": [f"{NS}/named/rule0/match0"],
                              "other.test": [f"{NS}/named/rule0/match0"]}
    # On the listener for *.example.com: the route's name where it is inside the wildcard, the wildcard
    # itself for a route without hostnames; other.test does not attach there.
    assert vhosts(config, f"{GATEWAY}:8080") == {"*.example.com": [f"{NS}/plain/rule0/match0"],
                                                 "a.example.com": [f"{NS}/named/rule0/match0"]}


def test_a_gateway_without_routes_listens_and_answers_404(valid):
    o = Objects("v1.0")
    config = valid(build(o, o.gateway_class(), o.gateway()))
    assert [ln["name"] for ln in config.listeners] == [f"{GATEWAY}:80"]
    assert vhosts(config) == {} and config.clusters == []


def test_only_our_http_listeners_with_an_address(valid):
    o = Objects("v1.0")
    theirs = o.gateway("theirs", cls="other")
    tls = o.gateway("tls", listeners=[{"name": "https", "port": 443, "protocol": "HTTPS"}])
    addresses = {(NS, "gw"): GATEWAY, (NS, "theirs"): "10.244.0.101", (NS, "tls"): "10.244.0.102"}
    config = valid(build(o, o.gateway_class(), o.gateway_class("other", controller="example.com/x"), o.gateway(),
                         theirs, tls, addresses=addresses))
    assert [ln["name"] for ln in config.listeners] == [f"{GATEWAY}:80"]
    assert build(o, o.gateway_class(), o.gateway(), addresses={}).listeners == []


def test_a_route_the_gateway_does_not_accept_is_not_served(valid):
    o = Objects("v1.0")
    gw = o.gateway(listeners=[{"name": "http", "port": 80, "protocol": "HTTP",
                               "allowedRoutes": {"namespaces": {"from": "Same"}}}])
    route = o.route(ns="ns2", parents=({"name": "gw", "namespace": NS},))
    config = valid(build(o, o.gateway_class(), gw, route, o.pool(ns="ns2")))
    assert vhosts(config) == {}


# -- addresses and the Gateway's status ------------------------------------------------------------------

def test_address_book_keeps_addresses_and_reuses_the_reported_one():
    o = Objects("v1.0")
    book = AddressBook(["10.244.0.100", "10.244.0.101"])
    a, b, c = o.gateway("a"), o.gateway("b"), o.gateway("c")
    b["status"] = {"addresses": [{"type": "IPAddress", "value": "10.244.0.101"}]}  # from before a restart
    assert book.address_for(b) == "10.244.0.101"
    assert book.address_for(a) == "10.244.0.100"
    assert book.address_for(a) == "10.244.0.100" and book.address_for(c) is None  # none left
    book.retain([(NS, "b"), (NS, "c")])  # a is gone
    assert book.address_for(c) == "10.244.0.100" and book.address_for(b) == "10.244.0.101"


def test_gateway_status_reports_the_address_and_programmed(tmp_path):
    o = Objects("v1.0")
    gw = o.gateway()
    world = o.world(o.gateway_class(), gw)
    plane = Dataplane(world, options(tmp_path, addresses=(GATEWAY,)))
    st = plane.gateway_status(status.gateway_status(gw, NOW), gw, NOW)
    assert st["addresses"] == [{"type": "IPAddress", "value": GATEWAY}]
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == \
        [("Accepted", "True", "Accepted"), ("Programmed", "True", "Programmed")]
    # Computed again from the status as written: the same status (no write loop, times kept).
    written = {**gw, "status": st}
    assert plane.gateway_status(status.gateway_status(written, "2030-01-01T00:00:00Z"), written,
                                "2030-01-01T00:00:00Z") == st
    # A second Gateway finds every address taken.
    other = o.gateway("other")
    st2 = plane.gateway_status(status.gateway_status(other, NOW), other, NOW)
    assert "addresses" not in st2
    assert ("Programmed", "False", "AddressNotAssigned") in [(c["type"], c["status"], c["reason"])
                                                             for c in st2["conditions"]]


def test_controller_writes_the_gateway_address_only_with_a_data_plane(tmp_path):
    o = Objects("v1.0")
    objs = [o.gateway_class(), o.gateway()]
    item = ("Gateway", NS, "gw")
    with_plane, kube = None, None
    for plane in (None, "dataplane"):
        cache = o.loaded(*objs)
        kube = FakeKube(objs, cache)
        with_plane = Dataplane(cache, options(tmp_path, addresses=(GATEWAY,))) if plane else None
        Controller(kube, cache, with_plane).reconcile(item)
        written = kube.objects[item]["status"]
        programmed = next(c for c in written["conditions"] if c["type"] == "Programmed")
        if plane is None:
            assert "addresses" not in written and programmed["status"] == "False"
        else:
            assert written["addresses"] == [{"type": "IPAddress", "value": GATEWAY}]
            assert programmed["status"] == "True"


def test_render_writes_clusters_then_listeners_and_only_on_change(tmp_path):
    o = Objects("v1.0")
    objs = basic(o)
    cache = o.loaded(*[x for x in objs if x["kind"] not in ("Pod", "EndpointSlice")])
    plane = Dataplane(cache, options(tmp_path, addresses=(GATEWAY,)))
    for x in objs:
        if x["kind"] in ("Pod", "EndpointSlice", "Service"):
            plane.inventory.add(x)
    assert plane.render() == {("Gateway", NS, "gw")}  # its address is new: its status must say so
    lds, cds = (json.loads((tmp_path / name).read_text()) for name in (LDS_FILE, CDS_FILE))
    assert [ln["name"] for ln in lds["resources"]] == [f"{GATEWAY}:80"]
    assert [c["name"] for c in cds["resources"]] == [f"epp/v1/{NS}/pool", f"pool/v1/{NS}/pool"]
    assert lds["version_info"] == dataplane.version_of(lds["resources"])
    inode = os.stat(tmp_path / LDS_FILE).st_ino
    assert plane.render() == set()  # nothing changed: nothing written
    assert os.stat(tmp_path / LDS_FILE).st_ino == inode
    plane.inventory.apply("Pod", "DELETED", pod("m2", POD_B))
    plane.render()
    assert os.stat(tmp_path / LDS_FILE).st_ino == inode  # only the clusters changed
    cds = json.loads((tmp_path / CDS_FILE).read_text())
    assert endpoints(cds["resources"][1]) == [(POD_A, 8000)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [CDS_FILE, LDS_FILE]  # no temporary file left


# -- the command line --------------------------------------------------------------------------------------

def test_flags():
    args = parse_args(["--envoy-config-dir", "envoy", "--gateway-address", GATEWAY,
                       "--gateway-address", "10.244.0.101", "--epp-tls"])
    assert (args.envoy_config_dir, args.gateway_address, args.epp_tls) == ("envoy", [GATEWAY, "10.244.0.101"], True)
    assert parse_args([]).envoy_config_dir is None


@pytest.mark.parametrize("argv", [["--gateway-address", GATEWAY], ["--epp-tls"],
                                  ["--envoy-config-dir", "d", "--gateway-address", "gateway.local"]])
def test_flags_refused(argv, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert "--gateway-address" in capsys.readouterr().err


# -- through a real Envoy, with no endpoint picker -----------------------------------------------------------

@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    """A sandbox with two model-server pods and an outsider on pod addresses, and Envoy reading config_dir."""
    if reason := netns.available():
        pytest.skip(reason)
    config_dir = tmp_path_factory.mktemp("envoy-config")
    with Sandbox(stop_timeout=2) as sb:
        sb.add_address(POD_A, POD_B, OUTSIDER, EPP, GATEWAY)
        for ip in (POD_A, POD_B, OUTSIDER):
            start_backend(sb, ip)
        with Envoy(sb, config_dir) as proxy:
            proxy.wait_ready()
            yield sb, proxy


def serve(plane, config: dataplane.Config) -> None:
    """Write the configuration as the reference does, and wait until Envoy has taken it up."""
    _, proxy = plane
    dataplane.write_file(proxy.config_dir, CDS_FILE, config.clusters)
    dataplane.write_file(proxy.config_dir, LDS_FILE, config.listeners)
    proxy.wait_applied()


def send(plane, path="/v1/completions", n=1, **spec) -> dict[str, int]:
    sb, _ = plane
    out = sb.run([sys.executable, "-c", CLIENT, json.dumps({"url": f"http://{GATEWAY}{path}", "n": n, **spec})],
                 timeout=60)
    return json.loads(out.stdout)


@NEEDS_SANDBOX
@pytest.mark.parametrize("revision", ["seed", "v1.0"])
def test_fail_open_serves_through_the_fallback_without_a_picker(plane, revision):
    """The picker's endpoint (EPP:9002) refuses connections: FailOpen still serves, from the pool's pods."""
    o = Objects(revision)
    serve(plane, build(o, *basic(o, failure="FailOpen", pool_kw={"ports": (3000,)})))
    counts = send(plane, n=6)
    assert set(counts) <= {f"200 served by {POD_A}:3000", f"200 served by {POD_B}:3000"}, counts
    assert sum(counts.values()) == 6


@NEEDS_SANDBOX
def test_fail_open_with_an_emptied_picker_service(plane):
    o = Objects("v1.6")
    objs = [x for x in basic(o, failure="FailOpen", pool_kw={"ports": (3000,)}) if x["kind"] != "EndpointSlice"]
    serve(plane, build(o, *objs))
    assert sum(v for k, v in send(plane, n=4).items() if k.startswith("200 served by")) == 4


@NEEDS_SANDBOX
@pytest.mark.parametrize("revision", ["seed", "v1.0"])
def test_fail_close_refuses_without_a_picker(plane, revision):
    o = Objects(revision)
    serve(plane, build(o, *basic(o, failure="FailClose", pool_kw={"ports": (3000,)})))
    assert send(plane, n=4) == {"500 ": 4}


@NEEDS_SANDBOX
def test_externalname_picker_and_missing_route_through_envoy(plane):
    o = Objects("v1.0")
    objs = basic(o, failure="FailOpen", picker_service=service(type_="ExternalName"), pool_kw={"ports": (3000,)})
    route = o.route(rules=[{"matches": [{"path": {"value": "/v1"}}], "backendRefs": [o.pool_backend("pool")]}])
    serve(plane, build(o, *objs[:2], route, *objs[3:]))
    assert send(plane, "/v1/completions", n=3) == {"500 ": 3}  # never served through an ExternalName picker
    assert send(plane, "/v2/completions") == {"404 ": 1}  # no route


@NEEDS_SANDBOX
def test_destination_is_followed_only_inside_the_pool(plane):
    """override_host takes the destination (here the header; an EPP sets metadata too) only when the pool
    holds it: a destination outside the pool (a live server) is never reached."""
    o = Objects("v1.6")
    serve(plane, build(o, o.gateway_class(), o.gateway(), o.route(), o.pool(no_picker=True, ports=(3000,)),
                       pod("m1", POD_A), pod("m2", POD_B)))
    header = "x-gateway-destination-endpoint"
    assert send(plane, n=5, headers={header: f"{POD_B}:3000"}) == {f"200 served by {POD_B}:3000": 5}
    assert send(plane, n=5, headers={header: f"{POD_A}:3000"}) == {f"200 served by {POD_A}:3000": 5}
    outside = send(plane, n=6, headers={header: f"{OUTSIDER}:3000"})
    assert not any(OUTSIDER in k for k in outside) and sum(outside.values()) == 6


@NEEDS_SANDBOX
def test_weights_split_between_two_pools(plane):
    o = Objects("v1.6")
    rule = {"backendRefs": [o.pool_backend("a", weight=3), o.pool_backend("b", weight=1)]}
    pool_a, pool_b = o.pool("a", no_picker=True, ports=(3000,)), o.pool("b", no_picker=True, ports=(3000,))
    pool_b["spec"]["selector"]["matchLabels"] = {"app": "b"}
    serve(plane, build(o, o.gateway_class(), o.gateway(), o.route(rules=[rule]), pool_a, pool_b,
                       pod("m1", POD_A), pod("m2", POD_B, labels={"app": "b"})))
    n = 200
    counts = send(plane, n=n)
    to_a = counts.get(f"200 served by {POD_A}:3000", 0)
    assert to_a + counts.get(f"200 served by {POD_B}:3000", 0) == n
    # 3:1 of 200 is 150; the binomial standard deviation is ~6.1, so this bound fails a right split
    # about once in a million runs.
    assert abs(to_a - 150) <= 30, counts




# -- the reference itself, on an embedded cluster, programming a real Envoy ---------------------------------

LIVE_TIMEOUT = 30


def eventually(check, what: str, timeout: float = LIVE_TIMEOUT):
    """Call check() until it returns something truthy twice in a row; its last answer."""
    deadline, last, good = time.monotonic() + timeout, None, 0
    while time.monotonic() < deadline:
        last = check()
        good = good + 1 if last else 0
        if good == 2:
            return last
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:g}s (last: {last!r})")


@NEEDS_SANDBOX
def test_the_reference_programs_envoy_on_a_live_cluster(tmp_path):
    """`python -m reference_gateway --envoy-config-dir` on the embedded cluster: the Gateway reports its
    address; FailOpen serves from the Ready pods while the picker refuses connections, FailClose then
    answers 500; a pod that turns NotReady gets no more requests; without the route, 404."""
    from kubernetes import config as kube_config

    from reference_gateway.kube import ApiError, Kube
    from reference_gateway.model import FIXED_RESOURCES, Resource

    from .test_smoke import embedded, running

    o, ns, controller = Objects("v1.6"), "apps", "example.com/dataplane"
    config_dir = tmp_path / "envoy"
    pods_api, slices_api = dataplane.RESOURCES["Pod"], dataplane.RESOURCES["EndpointSlice"]
    with embedded("v1.6") as (cluster, _), Sandbox(stop_timeout=2) as sb:
        kube = Kube(kube_config.new_client_from_config(config_file=str(cluster.kubeconfig)))

        def create(resource, obj):
            return kube.request("POST", resource.path(obj["metadata"].get("namespace")), body=obj)

        def set_pod(name, ip, ready):
            kube.request("PATCH", pods_api.path(ns, name, "status"), content_type="application/merge-patch+json",
                         body={"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
                             {"type": "Ready", "status": "True" if ready else "False"}]}})

        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        gw_api = FIXED_RESOURCES["Gateway"]
        create(FIXED_RESOURCES["GatewayClass"], {**o.gateway_class("envoy", controller), "metadata": {"name": "envoy"}})
        create(gw_api, {**o.gateway(cls="envoy", ns=ns), "metadata": {"name": "gw", "namespace": ns}})
        svc = service(ns=ns)
        create(FIXED_RESOURCES["Service"], {**svc, "spec": {"ports": svc["spec"]["ports"]}})  # no selector
        slice_ = endpoint_slice(ns=ns)
        slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "tests"
        create(slices_api, slice_)
        pool = o.pool(ns=ns, picker={"failureMode": "FailOpen"}, ports=(3000,))
        pool_api = o.rev.api.resource
        create(pool_api, {**pool, "metadata": {"name": "pool", "namespace": ns}})
        # Pods are admitted once their ServiceAccount exists: made here, not waited for from the controllers.
        try:
            create(Resource("ServiceAccount", "ServiceAccount", "", "v1", "serviceaccounts"),
                   {"metadata": {"name": "default", "namespace": ns}})
        except ApiError as e:
            if e.status != 409:  # the controller manager was first
                raise
        for name, ip in (("m1", POD_A), ("m2", POD_B)):
            create(pods_api, {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": name, "namespace": ns, "labels": {"app": "model"}},
                              "spec": {"automountServiceAccountToken": False,
                                       "containers": [{"name": "model", "image": "model-server"}]}})
            set_pod(name, ip, ready=True)
        create(FIXED_RESOURCES["HTTPRoute"], {**o.route(ns=ns), "metadata": {"name": "route", "namespace": ns}})

        sb.add_address(POD_A, POD_B, EPP, GATEWAY)
        for ip in (POD_A, POD_B):
            start_backend(sb, ip)
        with Envoy(sb, config_dir) as proxy, running(cluster, tmp_path / "reference.log", controller, ["v1.6"], (
                "--envoy-config-dir", str(config_dir), "--gateway-address", GATEWAY)):
            proxy.wait_ready()
            plane = (sb, proxy)
            gw = eventually(lambda: (kube.get(gw_api, "gw", ns) or {}).get("status", {}).get("addresses"),
                            "the Gateway's address")
            assert gw == [{"type": "IPAddress", "value": GATEWAY}]

            def answers(n=6):
                return send(plane, n=n)

            served = {f"200 served by {POD_A}:3000", f"200 served by {POD_B}:3000"}
            eventually(lambda: set(answers()) <= served, "FailOpen serving from both pods")

            set_pod("m2", POD_B, ready=False)
            eventually(lambda: answers() == {f"200 served by {POD_A}:3000": 6}, "only the Ready pod")

            kube.request("PATCH", pool_api.path(ns, "pool"), content_type="application/merge-patch+json",
                         body={"spec": {"endpointPickerRef": {"failureMode": "FailClose"}}})
            eventually(lambda: answers() == {"500 ": 6}, "FailClose refusing")

            kube.request("DELETE", FIXED_RESOURCES["HTTPRoute"].path(ns, "route"))
            eventually(lambda: answers(2) == {"404 ": 2}, "404 without the route")
            proxy.wait_applied()  # what the reference wrote last is valid, and taken up
