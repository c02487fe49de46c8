"""Pure status computations: cached objects in, the status to write out.

Nothing here talks to the API server or keeps state; every function takes the
current object, the `World` and the time (and for a pool the `Revision` of its
API), and returns the complete new `status`. The controller writes it only
when it differs from what is there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import behaviours, faults
from .model import (
    GATEWAY_GROUP,
    POOL_KIND,
    Key,
    World,
    backend_group_kind,
    generation,
    key,
    route_backends,
    route_parent_refs,
    show,
    spec,
    terminating,
)
from .revisions import Revision

MAX_PARENTS = 32  # API limit on a pool's status.parent(s) (and on HTTPRoute status.parents)
HARDCODED_CONTROLLER = "reference-gateway.example.com/controller"  # fault hardcoded-controller-name


def timestamp(t: float | None = None) -> str:
    """metav1.Time as the API server writes it: RFC 3339, whole seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def condition(type_: str, status: str, reason: str, message: str, observed_generation: int, now: str,
              previous: list[dict] | None, *, always_new_time: bool = False,
              keep_old_generation: bool = False) -> dict:
    """A metav1.Condition; lastTransitionTime moves only when `status` changes."""
    old = next((c for c in previous or [] if c.get("type") == type_), None)
    changed = old is None or old.get("status") != status or not old.get("lastTransitionTime")
    if keep_old_generation and old is not None and "observedGeneration" in old:
        observed_generation = old["observedGeneration"]
    return {
        "type": type_,
        "status": status,
        "observedGeneration": observed_generation,
        "lastTransitionTime": now if changed or always_new_time else old["lastTransitionTime"],
        "reason": reason,
        "message": message,
    }


def _merge_conditions(previous: list[dict], ours: list[dict]) -> list[dict]:
    """`ours` replace the conditions of the same type; other types stay where they are."""
    by_type = {c["type"]: c for c in ours}
    out = [by_type.pop(c.get("type"), c) for c in previous]
    return out + list(by_type.values())


# Behaviour extra-conditions: condition types an implementation may add beside the
# known ones (a domain-prefixed one and a plain one), with their reasons.
EXTRA_CONDITIONS = (("example.com/Programmed", "Programmed", "Configuration handed to the data plane."),
                    ("Reconciled", "ReconcileSucceeded", "The last reconcile succeeded."))


def as_written(ours: list[dict], gen: int, now: str, previous: list[dict] | None) -> list[dict]:
    """The conditions of one pool or route entry as this implementation writes them.

    Plain: as given. The benign behaviours change only the form: extra
    condition types (extra-conditions), the reverse order (reordered-conditions),
    the number of the rewrite round in each message (frequent-rewrites).
    """
    out = list(ours)
    if behaviours.on("extra-conditions"):
        out += [condition(t, "True", reason, message, gen, now, previous) for t, reason, message in EXTRA_CONDITIONS]
    if behaviours.on("reordered-conditions"):
        out.reverse()
    if behaviours.on("frequent-rewrites"):
        out = [{**c, "message": f"{c['message']} (rewrite {behaviours.rewrite_round()})"} for c in out]
    return out


# -- GatewayClass and Gateway ---------------------------------------------------

def gatewayclass_status(gc: dict, now: str) -> dict:
    st = dict(gc.get("status") or {})
    prev = st.get("conditions") or []
    st["conditions"] = _merge_conditions(prev, [
        condition("Accepted", "True", "Accepted", "Handled by the reference gateway controller.",
                  generation(gc), now, prev),
    ])
    return st


def gateway_status(gw: dict, now: str) -> dict:
    # Listeners and addresses are left alone: with no data plane there is
    # nothing true to report about them.
    st = dict(gw.get("status") or {})
    prev = st.get("conditions") or []
    gen = generation(gw)
    ours = [
        condition("Accepted", "True", "Accepted", "Gateway accepted.", gen, now, prev),
        condition("Programmed", "False", "Pending",
                  "This reference implementation has no data plane; nothing is programmed.", gen, now, prev),
    ]
    if behaviours.on("reordered-conditions"):
        ours.reverse()
    st["conditions"] = _merge_conditions(prev, ours)
    return st


# -- HTTPRoute ------------------------------------------------------------------

def _host_match(a: str, b: str) -> bool:
    return a == b or (a.startswith("*.") and b.endswith(a[1:])) or (b.startswith("*.") and a.endswith(b[1:]))


def attachment(route: dict, ref: dict, gw: dict) -> tuple[bool, str, str]:
    """Whether the Gateway accepts the route for this parentRef: (accepted, reason, message)."""
    route_ns, gw_ns = key(route)[0], key(gw)[0]
    listeners = spec(gw).get("listeners") or []
    if ref.get("sectionName"):
        listeners = [ln for ln in listeners if ln.get("name") == ref["sectionName"]]
    if ref.get("port"):
        listeners = [ln for ln in listeners if ln.get("port") == ref["port"]]
    if not listeners:
        return False, "NoMatchingParent", "No listener matches the parentRef's sectionName and port."

    def allows(ln: dict) -> bool:
        allowed = ln.get("allowedRoutes") or {}
        kinds = allowed.get("kinds")
        if kinds:
            if not any(k.get("group", GATEWAY_GROUP) == GATEWAY_GROUP and k.get("kind") == "HTTPRoute"
                       for k in kinds):
                return False
        elif ln.get("protocol") not in ("HTTP", "HTTPS"):
            return False
        origin = (allowed.get("namespaces") or {}).get("from", "Same")
        # Namespace selectors would need a watch on Namespaces; they are not supported.
        return origin == "All" or (origin == "Same" and route_ns == gw_ns)

    listeners = [ln for ln in listeners if allows(ln)]
    if not listeners:
        return False, "NotAllowedByListeners", "No matching listener allows this HTTPRoute."
    hostnames = spec(route).get("hostnames") or []
    if hostnames and not any(not ln.get("hostname") or any(_host_match(ln["hostname"], h) for h in hostnames)
                             for ln in listeners):
        return False, "NoMatchingListenerHostname", "No listener hostname matches the route's hostnames."
    return True, "Accepted", f"Accepted by Gateway {show(key(gw))}."


def backend_problem(route: dict, world: World) -> tuple[str, str] | None:
    """The first backendRef that does not resolve, as (reason, message); None when all do."""
    ns = key(route)[0]
    for b in route_backends(route):
        group, kind = backend_group_kind(b)
        target_ns, name = b.get("namespace") or ns, b["name"]
        if (group, kind) == ("", "Service"):
            store = world.services
        elif kind == POOL_KIND and group in world.pools:  # an InferencePool of an API watched
            store = world.pools[group]
        else:
            return "InvalidKind", f"backendRef {name}: kind {kind} in group {group!r} is not supported."
        if target_ns != ns:
            # Cross-namespace references need a ReferenceGrant, which this implementation does not read.
            return "RefNotPermitted", f"backendRef {name}: references to namespace {target_ns} are not permitted."
        if (target_ns, name) not in store:
            return "BackendNotFound", f"backendRef {kind} {target_ns}/{name} not found."
    return None


def route_status(route: dict, world: World, now: str) -> dict:
    """The route's status with this controller's `parents` entries brought up to date."""
    st = dict(route.get("status") or {})
    existing = list(st.get("parents") or [])
    me = world.controller_name
    gen = generation(route)
    problem = backend_problem(route, world)

    wanted: list[dict] = []
    for ref, gk in route_parent_refs(route):
        gw = world.gateways.get(gk)
        if not world.gateway_is_ours(gw):
            continue
        old = next((e for e in existing if e.get("controllerName") == me and e.get("parentRef") == ref), {})
        prev = old.get("conditions") or []
        accepted, reason, message = attachment(route, ref, gw)
        resolved = condition("ResolvedRefs", "True", "ResolvedRefs", "All backendRefs resolved.", gen, now, prev) \
            if problem is None else condition("ResolvedRefs", "False", problem[0], problem[1], gen, now, prev)
        conds = _merge_conditions(prev, as_written([
            condition("Accepted", "True" if accepted else "False", reason, message, gen, now, prev),
            resolved,
        ], gen, now, prev))
        if faults.on("route-no-observed-generation"):
            conds = [{k: v for k, v in c.items() if k != "observedGeneration"} for c in conds]
        wanted.append({"parentRef": ref, "controllerName": me, "conditions": conds})

    out: list[dict] = []
    for e in existing:
        if e.get("controllerName") != me:
            out.append(e)  # another controller's entry: never touched
            continue
        match = next((w for w in wanted if w["parentRef"] == e.get("parentRef")), None)
        if match is not None:
            out.append(match)
            wanted.remove(match)
    out += wanted
    foreign = sum(1 for e in out if e.get("controllerName") != me)
    budget = MAX_PARENTS - foreign
    kept = []
    for e in out:
        if e.get("controllerName") == me:
            if budget <= 0:
                continue
            budget -= 1
        kept.append(e)
    if kept or "parents" in st:
        st["parents"] = kept
    return st


# -- InferencePool --------------------------------------------------------------
# A pool is read and written through the `Revision` of its API: where its
# endpoint picker reference is, what its list of parent entries is called, how
# a parentRef is spelled, whether entries carry controllerName.

def extension_problem(pool: dict, world: World, revision: Revision) -> str | None:
    """Why the pool's endpoint picker reference does not resolve, or None when it does
    (or when the pool has none and its revision allows that: nothing to resolve)."""
    if faults.on("resolvedrefs-always-true"):
        return None
    ref = revision.picker_ref(pool)
    if ref is None:
        return None
    field_, ns = revision.api.picker_field, key(pool)[0]
    group = ref.group
    if faults.on("extension-group-ignored"):
        group = ""  # only the kind is looked at: a "Service" of any group counts as the core one
    if not faults.on("ignore-extension-kind") and (group, ref.kind) != ("", "Service"):
        return f"{field_} kind {ref.kind} in group {group!r} is not supported; only core Services are."
    svc = world.picker_service(ns, ref.name, pool)
    if svc is None:
        return f"{field_} Service {ns}/{ref.name} not found."
    # The API: implementations MUST NOT support ExternalName Services.
    if spec(svc).get("type") == "ExternalName" and not faults.on("accept-externalname"):
        return f"{field_} Service {ns}/{ref.name} is of type ExternalName, which is not supported."
    return None


def _resolved_message(pool: dict, revision: Revision) -> str:
    ref = revision.picker_ref(pool)
    if ref is None:
        return f"No {revision.api.picker_field}: nothing to resolve."
    return f"{revision.api.picker_field} resolves to Service {key(pool)[0]}/{ref.name} port {ref.port}."


@dataclass
class _Parent:
    """A Gateway of ours the pool should have an entry for, and the routes that lead there."""

    gateway: dict
    accepted: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)


def pool_parents(pool: dict, world: World, revision: Revision) -> dict[Key, _Parent]:
    """Gateways (of any namespace) that route to the pool through a route in the pool's namespace."""
    pool_key = key(pool)
    parents: dict[Key, _Parent] = {}
    for rk, route in sorted(world.routes.items()):
        # Same namespace only: cross-namespace backendRefs would need a ReferenceGrant.
        if rk[0] != pool_key[0] or terminating(route) or not any(
                backend_group_kind(b) == (revision.api.group, POOL_KIND) and b["name"] == pool_key[1]
                and (b.get("namespace") or rk[0]) == pool_key[0] for b in route_backends(route)):
            continue
        for ref, gk in route_parent_refs(route):
            gw = world.gateways.get(gk)
            if gw is None or terminating(gw) or not (world.gateway_is_ours(gw) or faults.on("claim-other-classes")):
                continue
            parent = parents.setdefault(gk, _Parent(gw))
            accepted = attachment(route, ref, gw)[0]
            bucket = parent.accepted if accepted else parent.rejected
            if route not in bucket:
                bucket.append(route)
    return {gk: p for gk, p in parents.items()
            if p.accepted or revision.route_not_accepted_reason is not None}


def _pool_entry(pool: dict, parent: _Parent, world: World, revision: Revision, old: dict | None,
                now: str) -> dict:
    routes = parent.accepted or parent.rejected
    target = routes[0] if faults.on("parentref-names-route") else parent.gateway
    ref = revision.parent_ref(target)
    if faults.on("parentref-wrong-namespace"):
        ref["namespace"] = "default"
    if faults.on("parentref-wrong-group"):  # the group of the implementation's own Gateway API
        if "apiVersion" in ref:
            ref["apiVersion"] = "networking.istio.io/v1"
        else:
            ref["group"] = "networking.istio.io"
    if faults.on("parentref-wrong-kind"):  # the kind of what the route attached through, not the Gateway's
        ref["kind"] = "ListenerSet"
    old_conditions = (old or {}).get("conditions") or []
    # Fault rebuild-conditions: conditions built afresh, as if none were there.
    prev = [] if faults.on("rebuild-conditions") else old_conditions
    gen = generation(pool)
    opts = dict(always_new_time=faults.on("bump-transition-time"),
                keep_old_generation=faults.on("stale-observed-generation"))
    wrong = faults.on("wrong-reason")
    names = ", ".join(key(r)[1] for r in routes)
    gw_name = show(key(parent.gateway))
    if parent.accepted:
        ports = ", ".join(str(p) for p in revision.api.target_ports(pool)) or "none"
        accepted = condition("Accepted", "True", "Ready" if wrong else "Accepted",
                             f"Referenced by HTTPRoute(s) {names} accepted by Gateway {gw_name}; "
                             f"target port(s) {ports}.", gen, now, prev, **opts)
    else:
        accepted = condition("Accepted", "False", revision.route_not_accepted_reason,
                             f"Gateway {gw_name} did not accept HTTPRoute(s) {names}.", gen, now, prev, **opts)
    conditions = [accepted]
    if not faults.on("drop-resolvedrefs"):
        problem = extension_problem(pool, world, revision)
        if problem is None:
            conditions.append(condition("ResolvedRefs", "True", "Resolved" if wrong else "ResolvedRefs",
                                        _resolved_message(pool, revision), gen, now, prev, **opts))
        else:
            conditions.append(condition("ResolvedRefs", "False", "InvalidExtensionRef", problem,
                                        gen, now, prev, **opts))
    conditions = as_written(conditions, gen, now, prev)
    if faults.on("rebuild-conditions") and _without_times(conditions) == _without_times(old_conditions):
        conditions = old_conditions  # only the times differ: nothing to write
    return revision.entry(ref, pool_entry_signature(world), conditions)


def _without_times(conditions: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]


def pool_entry_signature(world: World) -> str:
    """The controllerName this controller writes in pool parent entries, and knows its own by."""
    return HARDCODED_CONTROLLER if faults.on("hardcoded-controller-name") else world.controller_name


def entry_owner(entry: dict, world: World, revision: Revision, remembered: list[tuple[dict, Key]],
                pool_namespace: str) -> Key | None:
    """The Gateway of ours an existing entry reports for, or None when the entry is not ours.

    An entry carrying another controller's controllerName is never ours. Else
    it is ours when it is one we wrote before (`remembered`), when it carries
    our controllerName and names a Gateway, or when it names a Gateway of our
    class (pool entries of the revisions without controllerName carry no owner)."""
    written_by = entry.get("controllerName")
    if written_by and written_by != pool_entry_signature(world):
        return None
    ref = entry.get("parentRef") or {}
    for r, gk in remembered:
        if r == ref:
            return gk
    gk = revision.gateway_named(ref, pool_namespace)
    if gk is None or not (written_by or world.gateway_is_ours(world.gateways.get(gk))):
        return None
    return gk


@dataclass
class PoolStatus:
    status: dict
    # (parentRef, Gateway key) of every entry this controller now owns; the
    # controller remembers them to recognise its entries on the next reconcile.
    owned: list[tuple[dict, Key]]


def pool_status(pool: dict, world: World, revision: Revision, remembered: list[tuple[dict, Key]],
                now: str) -> PoolStatus:
    """The pool's status with this controller's parent entries brought up to date.

    Which entries are ours: `entry_owner`. Every other entry is kept as it is,
    in place: the list of parent entries is shared with other controllers.
    """
    st = dict(pool.get("status") or {})
    status_key = revision.status_key
    existing = revision.parents(pool)
    pool_ns = key(pool)[0]
    wanted = pool_parents(pool, world, revision)

    out: list[tuple[dict, Key | None]] = []
    done: set[Key] = set()
    dropped_ours = False
    for entry in existing:
        if revision.is_placeholder(entry) and wanted and not faults.on("keep-default-parent"):
            continue  # the CRD's placeholder goes once a controller manages the pool
        gk = entry_owner(entry, world, revision, remembered, pool_ns)
        if gk is None:
            if not faults.on("clobber-foreign-parents"):
                out.append((entry, None))
        elif gk in done:
            continue  # a duplicate of ours
        elif gk in wanted:
            out.append((_pool_entry(pool, wanted[gk], world, revision, entry, now), gk))
            done.add(gk)
        elif faults.on("never-remove-parent"):
            out.append((entry, gk))
            done.add(gk)
        else:
            dropped_ours = True
    for gk in sorted(wanted.keys() - done):
        out.append((_pool_entry(pool, wanted[gk], world, revision, None, now), gk))

    budget = MAX_PARENTS - sum(1 for _, gk in out if gk is None)
    kept: list[tuple[dict, Key | None]] = []
    for entry, gk in out:
        if gk is not None:
            if budget <= 0:
                continue  # over the API's limit: other controllers' entries win
            budget -= 1
        kept.append((entry, gk))
    if kept or status_key in st:
        st[status_key] = [e for e, _ in kept]
    if (not kept and dropped_ours and revision.status_placeholder
            and not behaviours.on("no-placeholder-restore")):
        # This controller no longer manages the pool and nobody else reports on it.
        st[status_key] = [revision.placeholder()]
    return PoolStatus(st, [(e["parentRef"], gk) for e, gk in kept if gk is not None])


def eager_pool_status(st: dict, revision: Revision, managed: bool) -> dict:
    """Behaviour eager-writer: the pool's status as computed, made explicit on every pool.

    A pool without the list of parent entries gets an empty one (`parent: []`
    or `parents: []`, so every new pool gets a status write at once); on a
    revision with a status default, the placeholder is removed from a pool this
    implementation has never managed (once it has managed the pool, a
    placeholder it put back stays). Foreign entries stay.
    """
    status_key = revision.status_key
    parents = st.get(status_key)
    if parents is None:
        return {**st, status_key: []}
    if not managed and revision.status_placeholder and any(revision.is_placeholder(e) for e in parents):
        return {**st, status_key: [e for e in parents if not revision.is_placeholder(e)]}
    return st


def pool_has_entry_of(pool: dict, world: World, revision: Revision, remembered: list[tuple[dict, Key]]) -> bool:
    """Whether the pool's status has an entry this implementation wrote (or would own)."""
    pool_ns = key(pool)[0]
    return any(entry_owner(e, world, revision, remembered, pool_ns) is not None for e in revision.parents(pool))


def route_has_entry_of(route: dict, world: World) -> bool:
    return any(e.get("controllerName") == world.controller_name
               for e in (route.get("status") or {}).get("parents") or [])
