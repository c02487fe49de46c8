"""Deliberate mistakes, for checking that the conformance suite catches them.

Each fault is one realistic bug, off unless named with `--fault NAME`, and is
wired at the single place where that bug would live, so switching it on makes
the implementation wrong in exactly that one way. A mutation run starts the
implementation once per fault and expects the suite to fail.

Every fault works the same on both InferencePool APIs: "extensionRef" below
is `endpointPickerRef` in `inference.networking.k8s.io/v1`, and "status.parent"
is `status.parents` there.
"""

from __future__ import annotations

from collections.abc import Iterable

FAULTS: dict[str, str] = {
    "accept-externalname":
        "treats an ExternalName Service as a valid extensionRef",
    "resolvedrefs-always-true":
        "reports ResolvedRefs True without looking at the extensionRef",
    "wrong-reason":
        "uses reason Ready instead of Accepted and Resolved instead of ResolvedRefs on pool conditions",
    "parentref-names-route":
        "the pool's parentRef names the HTTPRoute instead of the Gateway",
    "parentref-wrong-namespace":
        "the pool's parentRef carries the namespace 'default' instead of the Gateway's",
    "clobber-foreign-parents":
        "writes status.parent with only its own entries, dropping everyone else's",
    "never-remove-parent":
        "keeps a pool's parent entry after the last route from that Gateway is gone",
    "claim-other-classes":
        "writes pool entries for Gateways of any GatewayClass, not only its own",
    "stale-observed-generation":
        "pool conditions keep the observedGeneration of the first reconcile",
    "bump-transition-time":
        "pool conditions get a new lastTransitionTime on every write (so it writes on every event)",
    "ignore-extension-kind":
        "checks only the extensionRef's name, not its kind and group",
    "drop-resolvedrefs":
        "writes only the Accepted condition on pool entries",
    "hardcoded-controller-name":
        "pool entries carry a built-in controllerName (reference-gateway.example.com/controller), not the "
        "--controller-name its GatewayClass names; with revisions whose entries have no controllerName "
        "(v1alpha2, v1.0, v1.0.2) it changes nothing",
    "route-status-missing":
        "never writes HTTPRoute status",
    "route-no-observed-generation":
        "HTTPRoute conditions carry no observedGeneration (the CRD allows it; Gateway API's conformance does not)",
    "no-invalid-ref-on-delete":
        "ignores Service deletions, so a deleted extension Service still counts as resolved",
    "keep-default-parent":
        "(revisions with a status default) keeps the placeholder parent next to its own Accepted entry; "
        "with any other revision (the seed, v0.2 - v0.4, every v1 revision) there is no placeholder and it "
        "changes nothing",
    "parentref-wrong-group":
        "the pool's parentRef carries the group of another Gateway API, networking.istio.io "
        "(apiVersion networking.istio.io/v1 in an ObjectReference), with the Gateway's kind, name and namespace",
    "parentref-wrong-kind":
        "the pool's parentRef carries kind ListenerSet (what the route attached through) instead of Gateway, "
        "with the Gateway's group, name and namespace",
    "resolvedrefs-ignores-service-changes":
        "ResolvedRefs judges the extension Service as it was when the pool's spec last changed: "
        "creating, deleting or retyping the Service later is not seen until the pool's spec changes",
    "extension-group-ignored":
        "checks the extensionRef's kind but not its group: a 'Service' of any group counts as a core Service",
    "externalname-only-on-switch":
        "a Service's type is recorded when the Service first appears and never updated: one created as "
        "ExternalName is rejected, one switched to ExternalName later stays accepted",
    "drop-first-pool-event":
        "the event of a pool's creation is dropped (handled before the cache caught up); only later "
        "events that involve the pool, such as a route change naming it, reconcile it",
    "rebuild-conditions":
        "pool conditions are rebuilt from nothing on every reconcile, each with a fresh lastTransitionTime; "
        "it writes only when something besides the times differs, and then every condition's time moves",
    "replace-parent-list":
        "computes status.parent from its own record of what it last wrote, not from the pool as it is, and "
        "writes it with a JSON merge patch without resourceVersion: entries others added since are lost",
    # The data plane (the traffic tier): what Envoy is told to do with requests.
    "ignore-pick":
        "the data plane balances requests round robin over the pool's endpoints and ignores the endpoint "
        "picker's pick (the picker is still asked)",
    "swap-failure-modes":
        "the data plane fails open for a FailClose pool and closed for a FailOpen one",
    "fail-open-as-fail-close":
        "the data plane treats FailOpen as FailClose: with the endpoint picker unavailable, every request is refused",
    "no-served-endpoint":
        "the data plane does not report which endpoint served a request back to the endpoint picker",
    "route-to-not-ready":
        "the data plane's endpoints of a pool include the Pods that are not Ready",
    "ignore-weights":
        "the data plane splits a rule's requests evenly over its backendRefs, whatever their weights "
        "(a weight of 0 still leaves a backendRef out)",
    "first-target-port-only":
        "the data plane's endpoints of a pool are its Pods on the first of its targetPorts only",
    "h2c-as-http1":
        "the data plane ignores a pool's appProtocol: a kubernetes.io/h2c pool is reached over HTTP/1.1",
    "follow-externalname-picker":
        "the data plane connects to an ExternalName endpoint picker Service's externalName (its status "
        "still says the reference is invalid)",
    "first-rule-only":
        "the data plane sends the requests of every rule of an HTTPRoute to its first rule's backends",
    "routes-on-every-gateway":
        "the data plane serves an HTTPRoute on every Gateway of the namespace of a Gateway it names",
}
# The faults of the data plane: only a run with traffic can catch them.
TRAFFIC = frozenset({"ignore-pick", "swap-failure-modes", "fail-open-as-fail-close", "no-served-endpoint",
                     "route-to-not-ready", "ignore-weights", "first-target-port-only", "h2c-as-http1",
                     "follow-externalname-picker", "first-rule-only", "routes-on-every-gateway"})

_active: frozenset[str] = frozenset()


def activate(names: Iterable[str]) -> None:
    """Switch on exactly `names` (and switch off all others)."""
    global _active
    names = frozenset(names)
    unknown = names - FAULTS.keys()
    if unknown:
        raise ValueError(f"unknown fault(s): {', '.join(sorted(unknown))}")
    _active = names


def on(name: str) -> bool:
    """Is fault `name` switched on? (A typo here is a bug, so it raises.)"""
    if name not in FAULTS:
        raise KeyError(name)
    return name in _active


def active() -> frozenset[str]:
    return _active
