"""The reference gateway's data plane: Envoy listeners and clusters written to files, from the cluster's objects.

Why: status alone cannot show that FailOpen serves, FailClose refuses, an ExternalName endpoint picker
is never followed, or a request reaches the pod the endpoint picker (EPP) chose. With
`--envoy-config-dir DIR`, the controller also programs an Envoy: it writes Envoy's listeners
(`lds.json`) and clusters (`cds.json`) into DIR, which an Envoy bootstrapped to read those two files
(`path_config_source` with `watched_directory`) takes up on every rename into DIR. Without the flag
nothing here runs and the controller is the status-only one it always was.

What is written (`translate`, a pure function of the objects, so it is tested on plain dicts):

- Each Gateway of ours gets one address from `--gateway-address` (kept while the Gateway lives) and
  one Envoy listener per HTTP listener port, bound to that address. Its status gets
  `addresses: [{type: IPAddress, value}]` and `Programmed` True (`Programmed` False,
  `AddressNotAssigned`, when every address is taken).
- Each accepted HTTPRoute rule and match becomes an Envoy route in the virtual host of each hostname
  it serves (the route's hostnames intersected with the listener's), ordered by Gateway API
  precedence: exact path, longest prefix, method, most headers, most query parameters, oldest route.
  Path, header, query parameter and method matches map one to one; a rule's backendRefs become
  weighted clusters. A backendRef that cannot be served (unknown kind, other namespace, missing
  object, ExternalName Service, a pool whose endpoint picker does not resolve) names a cluster that
  never exists, which Envoy answers with 500; a request no route matches gets 404.
- An InferencePool (either API) becomes a STATIC cluster of its Ready pods (selector, pod IP) on each
  of its target ports, load-balanced by Envoy's override_host policy: the host the EPP names in the
  dynamic metadata `envoy.lb` / `x-gateway-destination-endpoint` (or that header) when it is one of
  the pool's endpoints, else round robin over them (the FailOpen fallback). The policy records the host
  it chose as `envoy.lb` / `x-gateway-destination-endpoint-served`, which ext_proc forwards to the
  EPP with the response headers (the protocol's served-endpoint report). Not an ORIGINAL_DST cluster:
  that would forward to whatever address a header names, and have nothing to fall back to.
- The pool's endpoint picker becomes an ext_proc filter (gRPC over HTTP/2, to a STATIC cluster of the
  ready addresses of the picker Service's EndpointSlices on the port the Service maps the picker port
  to), disabled on the listener and switched on by each route or weighted cluster that sends to the
  pool: request and response headers sent, bodies FULL_DUPLEX_STREAMED with trailers (what upstream's
  Envoy configurations for the EPP use, and what upstream's EPP v1.4.0 and v1.5.0 need: with the
  request body BUFFERED it never answers). `failure_mode_allow` is the pool's failureMode: FailOpen (the stream
  to the EPP fails, the request goes on to the fallback) or FailClose (500). A connect-only health
  check empties the picker cluster of endpoints that refuse connections, so that the stream fails
  before any body is streamed, while Envoy can still fail open. Envoy never connects to an
  ExternalName Service's target: such a picker gets no cluster at all.

Pods, EndpointSlices and Services (with their ports; the status cache keeps only their type) are
watched only with the flag; the identity the controller runs as then also needs list and watch on
pods and endpointslices (discovery.k8s.io).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import behaviours, faults, status
from .model import (
    INFERENCE_GA_GROUP,
    POOL_KIND,
    Item,
    Key,
    Resource,
    World,
    backend_group_kind,
    generation,
    key,
    route_parent_refs,
    show,
    spec,
    terminating,
)
from .revisions import Revision
from .watch import Watcher, wait_synced

log = logging.getLogger(__name__)

DESTINATION_KEY = "x-gateway-destination-endpoint"
SERVED_KEY = "x-gateway-destination-endpoint-served"
LB_NAMESPACE = "envoy.lb"
LDS_FILE, CDS_FILE = "lds.json", "cds.json"
DEFAULT_ADDRESS = "127.0.0.1"
# A cluster name no cluster ever has: a backendRef that cannot be served is sent there, and Envoy
# answers 500 (the route's cluster_not_found_response_code), as Gateway API asks for invalid backends.
UNSERVED = "unserved-backend"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
H2C = "kubernetes.io/h2c"

_LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
_CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
_EXT_PROC = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
_FILTER_CONFIG = "type.googleapis.com/envoy.config.route.v3.FilterConfig"
_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_OVERRIDE_HOST = "type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost"
_ROUND_ROBIN = "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin"
_TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"

# The resources the data plane watches besides the status cache's (only with --envoy-config-dir).
RESOURCES: dict[str, Resource] = {r.id: r for r in (
    Resource("Pod", "Pod", "", "v1", "pods"),
    Resource("EndpointSlice", "EndpointSlice", "discovery.k8s.io", "v1", "endpointslices"),
    Resource("Service.dataplane", "Service", "", "v1", "services"),
)}


@dataclass(frozen=True)
class Options:
    """How the data plane is written: where, on which addresses, and whether ext_proc speaks TLS."""

    config_dir: Path
    addresses: tuple[str, ...] = (DEFAULT_ADDRESS,)
    epp_tls: bool = False  # TLS to the EPP, its certificate not verified (upstream's EPP serves a self-signed one)
    message_timeout: str = "10s"  # how long ext_proc waits for each answer of the EPP
    route_timeout: str = "60s"


# -- what the data plane reads besides the status cache ----------------------------------------------

def _slim(kind: str, obj: dict) -> dict:
    md = obj.get("metadata") or {}
    out = {"name": md.get("name"), "namespace": md.get("namespace") or ""}
    if kind == "Pod":
        st = obj.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        out |= {"labels": dict(md.get("labels") or {}), "podIP": st.get("podIP") or "",
                "ready": ready and not md.get("deletionTimestamp")}
    elif kind == "EndpointSlice":
        out |= {"service": (md.get("labels") or {}).get(SERVICE_NAME_LABEL),
                "ports": [{"name": p.get("name") or "", "port": p.get("port")} for p in obj.get("ports") or []],
                "addresses": sorted({a for e in obj.get("endpoints") or []
                                     if (e.get("conditions") or {}).get("ready") is not False
                                     for a in e.get("addresses") or []})}
    else:  # Service
        sp = spec(obj)
        out |= {"type": sp.get("type") or "ClusterIP", "externalName": sp.get("externalName") or "",
                "ports": [{"name": p.get("name") or "", "port": p.get("port"), "targetPort": p.get("targetPort")}
                          for p in sp.get("ports") or []]}
    return out


class Inventory:
    """Pods, EndpointSlices and Services, slimmed to what the data plane reads; kept by watch events.

    It answers the watch threads as the status cache does (`apply`, `replace_all`), affecting no
    status work item; `changed` is called after every event."""

    def __init__(self, changed: Callable[[], None] = lambda: None) -> None:
        self.lock = threading.Lock()
        self.changed = changed
        self.pods: dict[Key, dict] = {}
        self.slices: dict[Key, dict] = {}
        self.services: dict[Key, dict] = {}
        self._stores = {"Pod": self.pods, "EndpointSlice": self.slices, "Service.dataplane": self.services}

    def add(self, obj: dict) -> None:
        """Put one object in (by its kind); for tests and for building an inventory by hand."""
        self.apply({"Pod": "Pod", "EndpointSlice": "EndpointSlice", "Service": "Service.dataplane"}[obj["kind"]],
                   "ADDED", obj)

    def apply(self, kind: str, event: str, obj: dict) -> set[Item]:
        with self.lock:
            k = key(obj)
            if event == "DELETED":
                self._stores[kind].pop(k, None)
            else:
                self._stores[kind][k] = _slim(kind, obj)
        self.changed()
        return set()

    def replace_all(self, kind: str, objs: Iterable[dict]) -> set[Item]:
        with self.lock:
            self._stores[kind].clear()
            for o in objs:
                self._stores[kind][key(o)] = _slim(kind, o)
        self.changed()
        return set()

    def snapshot(self) -> Inventory:
        with self.lock:
            copy = Inventory()
            copy.pods, copy.slices, copy.services = dict(self.pods), dict(self.slices), dict(self.services)
            copy._stores = {"Pod": copy.pods, "EndpointSlice": copy.slices, "Service.dataplane": copy.services}
            return copy


class AddressBook:
    """Which of the configured addresses each Gateway has: the first free one, kept while it lives.

    A Gateway that asks for one of them (spec.addresses) or already reports one (status.addresses,
    e.g. from before a restart) gets that one when it is free."""

    def __init__(self, addresses: Iterable[str]) -> None:
        self.addresses = list(dict.fromkeys(addresses))
        self.assigned: dict[Key, str] = {}
        self.lock = threading.Lock()

    def address_for(self, gw: dict) -> str | None:
        k = key(gw)
        with self.lock:
            if k in self.assigned:
                return self.assigned[k]
            taken = set(self.assigned.values())
            free = [a for a in self.addresses if a not in taken]
            if not free:
                return None
            wanted = [a.get("value") for a in spec(gw).get("addresses") or []
                      if a.get("type", "IPAddress") == "IPAddress"]
            wanted += [a.get("value") for a in (gw.get("status") or {}).get("addresses") or []]
            pick = next((a for a in wanted if a in free), free[0])
            self.assigned[k] = pick
            return pick

    def retain(self, keys: Iterable[Key]) -> None:
        """Free the addresses of Gateways not among `keys`."""
        keep = set(keys)
        with self.lock:
            for k in [k for k in self.assigned if k not in keep]:
                del self.assigned[k]


# -- the translation -----------------------------------------------------------------------------------

def _any(type_url: str, **fields) -> dict:
    return {"@type": type_url, **fields}


def _socket(address: str, port: int) -> dict:
    return {"socket_address": {"address": address, "port_value": int(port)}}


def _load_assignment(name: str, endpoints: Iterable[tuple[str, int]]) -> dict:
    return {"cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket(a, p)}} for a, p in endpoints]}]}


def _policy(name: str, config: dict) -> dict:
    return {"policies": [{"typed_extension_config": {"name": name, "typed_config": config}}]}


def _http2() -> dict:
    return {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _any(
        _HTTP_OPTIONS, explicit_http_config={"http2_protocol_options": {}})}


def _metadata_key(k: str) -> dict:
    return {"key": LB_NAMESPACE, "path": [{"key": k}]}


@dataclass
class _Pool:
    """What one InferencePool becomes: its cluster, and its ext_proc filter and EPP cluster if it has a picker."""

    cluster: dict
    filter_name: str | None = None
    ext_proc: dict | None = None
    epp_cluster: dict | None = None
    problem: str | None = None  # why the pool cannot be served (then nothing above is used)


@dataclass
class Config:
    """Envoy's listeners and clusters for the whole world, as JSON-ready dicts (with their @type)."""

    listeners: list[dict] = field(default_factory=list)
    clusters: list[dict] = field(default_factory=list)

    def cluster(self, name: str) -> dict | None:
        return next((c for c in self.clusters if c["name"] == name), None)

    def listener(self, name: str) -> dict | None:
        return next((ln for ln in self.listeners if ln["name"] == name), None)


def pool_cluster_name(group: str, k: Key) -> str:
    return f"pool/{_api_tag(group)}/{k[0]}/{k[1]}"


def epp_cluster_name(group: str, k: Key) -> str:
    return f"epp/{_api_tag(group)}/{k[0]}/{k[1]}"


def ext_proc_filter_name(group: str, k: Key) -> str:
    return f"ext_proc/{_api_tag(group)}/{k[0]}/{k[1]}"


def _api_tag(group: str) -> str:
    return "v1" if group == INFERENCE_GA_GROUP else "v1alpha2"


def _selector(pool: dict, group: str) -> dict:
    sel = spec(pool).get("selector") or {}
    if group == INFERENCE_GA_GROUP:
        sel = sel.get("matchLabels") or {}
    return sel if isinstance(sel, dict) else {}


def pool_endpoints(pool: dict, revision: Revision, inventory: Inventory) -> list[tuple[str, int]]:
    """(pod IP, target port) of every Ready pod the pool selects, for every target port of the pool.

    An empty selector selects nothing (as for a Service): a pool is never every pod of a namespace."""
    ns, group = key(pool)[0], revision.api.group
    selector = _selector(pool, group)
    ports = revision.api.target_ports(pool)
    if faults.on("first-target-port-only"):
        ports = ports[:1]
    if not selector:
        return []
    ips = sorted({p["podIP"] for (pns, _), p in inventory.pods.items()
                  if pns == ns and (p["ready"] or faults.on("route-to-not-ready")) and p["podIP"]
                  and all(p["labels"].get(k) == v for k, v in selector.items())})
    return [(ip, port) for ip in ips for port in ports]


def service_endpoints(ns: str, name: str, port: int, inventory: Inventory) -> list[tuple[str, int]]:
    """The ready (address, port) pairs of Service ns/name's EndpointSlices for its port `port`.

    The Service's port of that number names the EndpointSlice port (by the Service port's name),
    whose number is the endpoints' (the target port)."""
    svc = inventory.services.get((ns, name))
    if svc is None or svc["type"] == "ExternalName":
        return []
    sp = next((p for p in svc["ports"] if p["port"] == port), None)
    if sp is None:
        return []
    out: set[tuple[str, int]] = set()
    for (sns, _), sl in inventory.slices.items():
        if sns != ns or sl["service"] != name:
            continue
        for p in sl["ports"]:
            if p["name"] == sp["name"] and p["port"]:
                out |= {(a, p["port"]) for a in sl["addresses"]}
    return sorted(out)


def picker_problem(pool: dict, revision: Revision, inventory: Inventory) -> str | None:
    """Why the pool's endpoint picker reference cannot be followed; None when it can (or there is none)."""
    ref = revision.picker_ref(pool)
    if ref is None:
        return None
    ns = key(pool)[0]
    if (ref.group, ref.kind) != ("", "Service"):
        return f"picker kind {ref.kind} in group {ref.group!r} is not a core Service"
    svc = inventory.services.get((ns, ref.name))
    if svc is None:
        return f"picker Service {ns}/{ref.name} not found"
    if svc["type"] == "ExternalName":  # the API: implementations MUST NOT support ExternalName Services
        return f"picker Service {ns}/{ref.name} is of type ExternalName"
    return None


def failure_mode(pool: dict, revision: Revision) -> str:
    """The pool's failureMode; FailClose (the API's default) when it says nothing."""
    ref = spec(pool).get(revision.api.picker_field)
    mode = (ref.get("failureMode") if isinstance(ref, dict) else None) or "FailClose"
    if faults.on("swap-failure-modes"):
        return {"FailOpen": "FailClose", "FailClose": "FailOpen"}.get(mode, mode)
    if faults.on("fail-open-as-fail-close"):
        return "FailClose"
    return mode


# What ext_proc sends the EPP: headers both ways, bodies FULL_DUPLEX_STREAMED, which needs the trailers
# sent too (they tell the EPP that a body is complete).
PROCESSING_MODE = {"request_header_mode": "SEND", "response_header_mode": "SEND",
                   "request_body_mode": "FULL_DUPLEX_STREAMED", "response_body_mode": "FULL_DUPLEX_STREAMED",
                   "request_trailer_mode": "SEND", "response_trailer_mode": "SEND"}


def translate_pool(pool: dict, revision: Revision, inventory: Inventory, options: Options) -> _Pool:
    group, k = revision.api.group, key(pool)
    name = pool_cluster_name(group, k)
    round_robin = _policy("envoy.load_balancing_policies.round_robin", _any(_ROUND_ROBIN))
    served = {} if faults.on("no-served-endpoint") else {"selected_host_key": _metadata_key(SERVED_KEY)}
    cluster = {
        "@type": _CLUSTER, "name": name, "type": "STATIC", "connect_timeout": "2s",
        "load_balancing_policy": round_robin if faults.on("ignore-pick") else _policy(
            "envoy.load_balancing_policies.override_host", _any(
                _OVERRIDE_HOST,
                override_host_sources=[{"metadata": _metadata_key(DESTINATION_KEY)}, {"header": DESTINATION_KEY}],
                **served, fallback_policy=round_robin)),
        "load_assignment": _load_assignment(name, pool_endpoints(pool, revision, inventory)),
    }
    if spec(pool).get("appProtocol") == H2C and not faults.on("h2c-as-http1"):
        cluster["typed_extension_protocol_options"] = _http2()
    out = _Pool(cluster)
    ref = revision.picker_ref(pool)
    if ref is None:
        return out
    picker_endpoints, discovery = service_endpoints(k[0], ref.name, ref.port, inventory), "STATIC"
    if problem := picker_problem(pool, revision, inventory):
        svc = inventory.services.get((k[0], ref.name)) or {}
        if not (faults.on("follow-externalname-picker") and svc.get("type") == "ExternalName"):
            out.problem = problem
            return out
        picker_endpoints, discovery = [(svc["externalName"], ref.port)], "STRICT_DNS"  # a name, or an IP as itself
    epp_name = epp_cluster_name(group, k)
    out.epp_cluster = {
        "@type": _CLUSTER, "name": epp_name, "type": discovery, "connect_timeout": "1s",
        "typed_extension_protocol_options": _http2(),
        "load_assignment": _load_assignment(epp_name, picker_endpoints),
        # With bodies FULL_DUPLEX_STREAMED, Envoy can fail open only until the first body chunk is handed
        # to the ext_proc stream: a stream that fails later (a connect refused after the body came) is a
        # 500 whatever failure_mode_allow says. A connect-only health check takes an EPP that does not
        # accept connections out of the cluster, and with no panic threshold an empty cluster fails
        # the stream at once, before any body: FailOpen then holds.
        "health_checks": [{"timeout": "1s", "interval": "1s", "no_traffic_interval": "1s",
                           "no_traffic_healthy_interval": "1s", "unhealthy_threshold": 1,
                           "healthy_threshold": 1, "tcp_health_check": {}}],
        "common_lb_config": {"healthy_panic_threshold": {"value": 0}},
    }
    if options.epp_tls:
        out.epp_cluster["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": _any(_TLS, common_tls_context={"alpn_protocols": ["h2"]})}
    out.filter_name = ext_proc_filter_name(group, k)
    out.ext_proc = {"name": out.filter_name, "disabled": True, "typed_config": _any(
        _EXT_PROC,
        grpc_service={"envoy_grpc": {"cluster_name": epp_name, "authority": f"{ref.name}.{k[0]}.svc:{ref.port}"}},
        failure_mode_allow=failure_mode(pool, revision) == "FailOpen",
        processing_mode=PROCESSING_MODE,
        message_timeout=options.message_timeout,
        metadata_options={"forwarding_namespaces": {"untyped": [LB_NAMESPACE]},
                          "receiving_namespaces": {"untyped": [LB_NAMESPACE]}},
        # The pool (the weighted cluster) is chosen once, before the EPP is asked; it stays chosen.
        route_cache_action="RETAIN")}
    return out


def _service_cluster(ns: str, name: str, port: int, inventory: Inventory) -> dict:
    cname = f"service/{ns}/{name}/{port}"
    return {"@type": _CLUSTER, "name": cname, "type": "STATIC", "connect_timeout": "2s",
            "load_assignment": _load_assignment(cname, service_endpoints(ns, name, port, inventory))}


class _Backends:
    """Resolves backendRefs to Envoy clusters, building each pool's and Service's cluster once."""

    def __init__(self, world: World, inventory: Inventory, options: Options) -> None:
        self.world, self.inventory, self.options = world, inventory, options
        self.pools: dict[tuple[str, Key], _Pool] = {}
        self.services: dict[str, dict] = {}

    def pool(self, group: str, k: Key) -> _Pool | None:
        if (group, k) not in self.pools:
            pool = self.world.pools.get(group, {}).get(k)
            if pool is None or terminating(pool):
                return None
            self.pools[(group, k)] = translate_pool(pool, self.world.revisions[group], self.inventory, self.options)
        return self.pools[(group, k)]

    def resolve(self, backend: dict, route_ns: str) -> tuple[str, str | None]:
        """(cluster name, ext_proc filter to switch on or None); UNSERVED when it cannot be served."""
        group, kind = backend_group_kind(backend)
        ns, name = backend.get("namespace") or route_ns, backend.get("name") or ""
        if ns != route_ns:  # cross-namespace references need a ReferenceGrant, which is not read
            return UNSERVED, None
        if kind == POOL_KIND and group in self.world.pools:
            pool = self.pool(group, (ns, name))
            if pool is None or pool.problem:
                return UNSERVED, None
            return pool.cluster["name"], pool.filter_name
        if (group, kind) == ("", "Service") and isinstance(backend.get("port"), int):
            svc = self.inventory.services.get((ns, name))
            if svc is None or svc["type"] == "ExternalName":
                return UNSERVED, None
            cluster = _service_cluster(ns, name, backend["port"], self.inventory)
            self.services[cluster["name"]] = cluster
            return cluster["name"], None
        return UNSERVED, None

    def clusters(self) -> list[dict]:
        out = list(self.services.values())
        for p in self.pools.values():
            if not p.problem:
                out.append(p.cluster)
                if p.epp_cluster is not None:
                    out.append(p.epp_cluster)
        return out

    def ext_proc(self, name: str) -> dict:
        return next(p.ext_proc for p in self.pools.values() if p.filter_name == name)


def _enable(filter_name: str | None) -> dict:
    return {"typed_per_filter_config": {filter_name: _any(_FILTER_CONFIG, config={})}} if filter_name else {}


def _path_match(path: dict | None) -> tuple[dict, tuple]:
    """Envoy's path match for a Gateway API one, and its precedence (lower sorts first)."""
    path = path or {}
    kind, value = path.get("type") or "PathPrefix", path.get("value") or "/"
    if kind == "Exact":
        return {"path": value}, (0, -len(value))
    if kind == "RegularExpression":
        return {"safe_regex": {"regex": value}}, (2, -len(value))
    trimmed = value.rstrip("/")  # a prefix matches whole path elements; a trailing slash is ignored
    if not trimmed:
        return {"prefix": "/"}, (1, -1)
    return {"path_separated_prefix": trimmed}, (1, -len(trimmed))


def _string_match(kind: str | None, value: str) -> dict:
    return {"safe_regex": {"regex": value}} if kind == "RegularExpression" else {"exact": value}


def _route_match(m: dict) -> tuple[dict, tuple]:
    match, rank = _path_match(m.get("path"))
    headers = [{"name": h["name"].lower(), "string_match": _string_match(h.get("type"), h.get("value") or "")}
               for h in m.get("headers") or []]
    if m.get("method"):
        headers.append({"name": ":method", "string_match": {"exact": m["method"]}})
    if headers:
        match["headers"] = headers
    queries = [{"name": q["name"], "string_match": _string_match(q.get("type"), q.get("value") or "")}
               for q in m.get("queryParams") or []]
    if queries:
        match["query_parameters"] = queries
    return match, (*rank, 0 if m.get("method") else 1, -len(m.get("headers") or []), -len(queries))


def _route_action(rule: dict, route_ns: str, backends: _Backends, options: Options) -> tuple[dict, set[str]]:
    """The Envoy route's action for a rule's backendRefs, and the ext_proc filters it switches on."""
    picked = []
    for b in rule.get("backendRefs") or []:
        weight = b.get("weight", 1)
        if isinstance(weight, int) and weight > 0:
            picked.append((*backends.resolve(b, route_ns), 1 if faults.on("ignore-weights") else weight))
    filters = {f for _, f, _ in picked if f}
    if not picked:  # no backend, or every weight zero: nothing to forward to
        return {"direct_response": {"status": 500}}, set()
    action: dict = {"timeout": options.route_timeout, "cluster_not_found_response_code": "INTERNAL_SERVER_ERROR"}
    if len(picked) == 1:
        cluster, filter_name, _ = picked[0]
        return {"route": {"cluster": cluster, **action}, **_enable(filter_name)}, filters
    action["weighted_clusters"] = {"clusters": [{"name": c, "weight": w, **_enable(f)} for c, f, w in picked]}
    return {"route": action}, filters


def _hostnames(route: dict, listener: dict) -> list[str]:
    """The hostnames the route serves on the listener (Envoy domains; "*" for any)."""
    lh, hosts = listener.get("hostname"), spec(route).get("hostnames") or []
    if not lh:
        return sorted(set(hosts)) or ["*"]
    if not hosts:
        return [lh]
    out = set()
    for h in hosts:
        if status._host_match(lh, h):
            # The more specific of the two: a name rather than a wildcard, else the longer wildcard.
            out.add(min((lh, h), key=lambda n: (n.startswith("*"), -len(n))))
    return sorted(out)


def _accepted_listeners(route: dict, ref: dict, gw: dict) -> list[dict]:
    """The Gateway's listeners that accept the route through this parentRef (as the status says)."""
    out = []
    for ln in spec(gw).get("listeners") or []:
        alone = {**gw, "spec": {**spec(gw), "listeners": [ln]}}
        if status.attachment(route, ref, alone)[0]:
            out.append(ln)
    return out


def _created(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("creationTimestamp") or ""


def _parents(route: dict, addresses: dict[Key, str]) -> list[tuple[dict, Key]]:
    """The route's (parentRef, Gateway key) pairs: those its parentRefs name."""
    refs = list(route_parent_refs(route))
    if faults.on("routes-on-every-gateway"):  # and every other addressed Gateway of a named one's namespace
        named = {gk: ref for ref, gk in refs}
        refs += [({**ref, "name": other[1]}, other) for gk, ref in named.items()
                 for other in sorted(addresses) if other[0] == gk[0] and other not in named]
    return refs


def translate(world: World, inventory: Inventory, addresses: dict[Key, str], options: Options) -> Config:
    """Envoy's listeners and clusters for the Gateways of ours that have an address in `addresses`."""
    backends = _Backends(world, inventory, options)
    # (address, port) -> hostname -> [(precedence, Envoy route)], and the ext_proc filters each listener needs
    vhosts: dict[tuple[str, int], dict[str, list[tuple[tuple, dict]]]] = {}
    filters: dict[tuple[str, int], set[str]] = {}
    for gk, gw in sorted(world.gateways.items()):
        if gk in addresses and world.gateway_is_ours(gw):
            for ln in spec(gw).get("listeners") or []:
                if ln.get("protocol") == "HTTP" and isinstance(ln.get("port"), int):
                    vhosts.setdefault((addresses[gk], ln["port"]), {})
                    filters.setdefault((addresses[gk], ln["port"]), set())
    for rk, route in sorted(world.routes.items()):
        if terminating(route):
            continue
        for ref, gk in _parents(route, addresses):
            gw = world.gateways.get(gk)
            if gk not in addresses or not world.gateway_is_ours(gw):
                continue
            for ln in _accepted_listeners(route, ref, gw):
                where = (addresses[gk], ln.get("port"))
                if ln.get("protocol") != "HTTP" or where not in vhosts:
                    continue
                rules = spec(route).get("rules") or []
                for ri, rule in enumerate(rules):
                    action, used = _route_action(rules[0] if faults.on("first-rule-only") else rule, rk[0],
                                                 backends, options)
                    filters[where] |= used
                    for mi, m in enumerate(rule.get("matches") or [{}]):
                        match, rank = _route_match(m)
                        order = (*rank, _created(route), rk, ri, mi)
                        entry = {"name": f"{show(rk)}/rule{ri}/match{mi}", "match": match, **action}
                        for host in _hostnames(route, ln):
                            routes = vhosts[where].setdefault(host, [])
                            if not any(r["name"] == entry["name"] for _, r in routes):
                                routes.append((order, entry))
    listeners = []
    for (address, port), hosts in sorted(vhosts.items()):
        virtual_hosts = [{"name": host, "domains": [host], "routes": [r for _, r in sorted(routes, key=lambda x: x[0])]}
                         for host, routes in sorted(hosts.items())]
        hcm = _any(_HCM, stat_prefix=f"gateway_{port}", strip_any_host_port=True, normalize_path=True,
                   route_config={"name": f"{address}:{port}", "validate_clusters": False,
                                 "virtual_hosts": virtual_hosts},
                   http_filters=[*(backends.ext_proc(f) for f in sorted(filters[(address, port)])),
                                 {"name": "envoy.filters.http.router", "typed_config": _any(_ROUTER)}])
        listeners.append({"@type": _LISTENER, "name": f"{address}:{port}", "address": _socket(address, port),
                          "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                          "typed_config": hcm}]}]})
    clusters = sorted(backends.clusters(), key=lambda c: c["name"])
    return Config(listeners, clusters)


# -- files ---------------------------------------------------------------------------------------------

def version_of(resources: list[dict]) -> str:
    """A version_info that names the content: the same resources always get the same version."""
    return hashlib.sha256(json.dumps(resources, sort_keys=True).encode()).hexdigest()[:16]


def write_file(config_dir: Path, name: str, resources: list[dict]) -> str:
    """Atomically replace config_dir/name with a DiscoveryResponse of these resources; its version."""
    version = version_of(resources)
    target = config_dir / name
    tmp = config_dir / f".{name}.tmp"
    tmp.write_text(json.dumps({"version_info": version, "resources": resources}, indent=1))
    os.replace(tmp, target)  # Envoy takes a file up on a rename into the watched directory
    return version


# -- the running data plane ----------------------------------------------------------------------------

class Dataplane:
    """Keeps the Envoy configuration in `options.config_dir` in step with the cluster.

    The controller hands it the status cache; it watches Pods, EndpointSlices and Services itself and
    rewrites the files (clusters first, then listeners) whenever the translation changes. `poke` is
    called on every watch event; a thread renders once everything has been listed."""

    def __init__(self, world: World, options: Options) -> None:
        self.world, self.options = world, options
        self.inventory = Inventory(self.poke)
        self.book = AddressBook(options.addresses)
        self._dirty = threading.Event()
        self._thread: threading.Thread | None = None
        self._written: dict[str, str] = {}  # file name -> the JSON last written
        self._addresses: dict[Key, str] = {}  # what the Gateways' status was last told
        self.renders = 0

    def poke(self) -> None:
        self._dirty.set()

    def start(self, kube, stop: threading.Event, enqueue: Callable[[set[Item]], None], synced: Callable[[], bool]):
        """Start the watches of Pods, EndpointSlices and Services and the render thread.

        `enqueue` takes status work items (a Gateway whose address changed); `synced` blocks until the
        status cache's watches have listed everything (False when stopping)."""
        self.options.config_dir.mkdir(parents=True, exist_ok=True)
        watchers = [Watcher(kube, r, self.inventory, lambda _items: None, stop) for r in RESOURCES.values()]
        for w in watchers:
            w.start()

        def run() -> None:
            if not synced() or not wait_synced(watchers, stop):
                return
            log.info("data plane: writing Envoy configuration to %s", self.options.config_dir)
            self._dirty.set()
            while not stop.is_set():
                if not self._dirty.wait(0.5):
                    continue
                if delay := behaviours.dataplane_delay():
                    log.info("data plane: taking the change up %gs late (slow-dataplane)", delay)
                stop.wait(delay or 0.02)  # let a burst of events land first
                self._dirty.clear()
                try:
                    enqueue(self.render())
                except Exception as e:  # keep the thread alive; the next event renders again
                    log.warning("data plane: %s", e)
                    stop.wait(1.0)
                    self._dirty.set()

        self._thread = threading.Thread(target=run, name="dataplane", daemon=True)
        self._thread.start()

    def addresses(self) -> dict[Key, str]:
        """The address of each Gateway of ours that has one (assigning free ones), oldest Gateway first."""
        with getattr(self.world, "lock", _NO_LOCK):
            ours = {k: gw for k, gw in self.world.gateways.items() if self.world.gateway_is_ours(gw)}
        self.book.retain(ours)
        out = {}
        for k, gw in sorted(ours.items(), key=lambda kv: (_created(kv[1]), kv[0])):
            if (address := self.book.address_for(gw)) is not None:
                out[k] = address
        return out

    def render(self) -> set[Item]:
        """Write the configuration if it changed; the Gateways whose status must report a new address."""
        addresses = self.addresses()
        with getattr(self.world, "lock", _NO_LOCK):
            world = _copy_world(self.world)
        config = translate(world, self.inventory.snapshot(), addresses, self.options)
        self.renders += 1
        for name, resources in ((CDS_FILE, config.clusters), (LDS_FILE, config.listeners)):
            text = json.dumps(resources, sort_keys=True)
            if self._written.get(name) != text:
                version = write_file(self.options.config_dir, name, resources)
                self._written[name] = text
                log.info("data plane: wrote %s version %s (%d %s)", name, version, len(resources),
                         "clusters" if name == CDS_FILE else "listeners")
        changed = {k for k in addresses.keys() | self._addresses.keys() if addresses.get(k) != self._addresses.get(k)}
        self._addresses = addresses
        return {("Gateway", *k) for k in changed}

    def gateway_status(self, st: dict, gw: dict, now: str) -> dict:
        """The Gateway's status with its address and Programmed condition (the data plane has listeners)."""
        address = self.book.address_for(gw)
        st = dict(st)
        conditions = st.get("conditions") or []
        prev = (gw.get("status") or {}).get("conditions") or []  # as written before: transition times stay
        if address is None:
            st.pop("addresses", None)
            programmed = status.condition(
                "Programmed", "False", "AddressNotAssigned",
                f"Every address the data plane serves on is taken ({', '.join(self.book.addresses)}).",
                generation(gw), now, prev)
        else:
            st["addresses"] = [{"type": "IPAddress", "value": address}]
            programmed = status.condition("Programmed", "True", "Programmed",
                                          f"Served by the Envoy configuration this controller writes, on {address}.",
                                          generation(gw), now, prev)
        st["conditions"] = [programmed if c.get("type") == "Programmed" else c for c in conditions]
        if not any(c.get("type") == "Programmed" for c in conditions):
            st["conditions"].append(programmed)
        return st


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_LOCK = _NoLock()


def _copy_world(world: World) -> World:
    """A shallow copy of the world's stores (the objects themselves are replaced, never changed, by events)."""
    copy = World(world.controller_name, world.gateway_class, world.revisions.values())
    copy.classes.update(world.classes)
    copy.gateways.update(world.gateways)
    copy.routes.update(world.routes)
    copy.services.update(world.services)
    for group, pools in world.pools.items():
        copy.pools[group].update(pools)
    return copy
