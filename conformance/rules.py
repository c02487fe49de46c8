"""The rules of the contract (SPEC sections 3 and 8), by ID, and the coverage matrix.

The S/D/C/X rules are worded with the v1alpha2 field names; they hold for the
GA API with its names (`selector.matchLabels`, `targetPorts[].number`,
`endpointPickerRef`, `status.parents`). S13-S17, D8-D9 and C14-C16 are the GA
API's own (a test of one declares which revisions have it). T1-T8 are the
traffic tier's (SPEC section 10).
"""

from __future__ import annotations

RULES: dict[str, str] = {
    "S1": "spec.selector is required; values obey LabelValue; {} is accepted",
    "S2": "spec.targetPortNumber is required, an integer, 1..65535",
    "S3": "spec.extensionRef is required",
    "S4": "extensionRef.name is required, 1..253 chars",
    "S5": "extensionRef.group obeys Group",
    "S6": "extensionRef.kind obeys Kind",
    "S7": "extensionRef.portNumber is optional, 1..65535",
    "S8": "extensionRef.failureMode is one of FailOpen, FailClose",
    "S9": "status.parent: at most 32 entries, parentRef required, conditions obey metav1.Condition",
    "S10": "status is a subresource; generation moves on spec changes only",
    "S11": "unknown fields are pruned; rejected with fieldValidation=Strict",
    "S12": "boundary values are accepted",
    "D1": "extensionRef.group defaults to \"\"",
    "D2": "extensionRef.kind defaults to Service",
    "D3": "extensionRef.failureMode defaults to FailClose",
    "D4": "extensionRef.portNumber is not defaulted",
    "D5": "a status parent without conditions gets the revision's default conditions",
    "D6": "explicit values are kept",
    "D7": "defaults show on dry-run, create, update, server-side apply and read-back",
    "C1": "the pool gets a status.parent entry naming the Gateway",
    "C2": "Accepted is True with reason Accepted",
    "C3": "ResolvedRefs is True with reason ResolvedRefs while the extensionRef resolves",
    "C4": "observedGeneration matches metadata.generation after every spec change",
    "C5": "extensionRef to a missing Service: ResolvedRefs False, InvalidExtensionRef",
    "C6": "transitions both ways; lastTransitionTime changes only with the status",
    "C7": "extensionRef of an unsupported kind or group: ResolvedRefs False, InvalidExtensionRef",
    "C8": "two Gateways of the class: two parent entries",
    "C9": "the route removed: that Gateway's entry goes away",
    "C10": "entries of other controllers are left untouched",
    "C11": "a Gateway of another class gets no entry from this implementation",
    "C12": "no route to the pool: no entry from this implementation",
    "C13": "the HTTPRoute: Accepted True; ResolvedRefs True, or False/BackendNotFound without the pool",
    "S13": "targetPorts: required, 1..maxItems of the revision, numbers 1..65535, unique (v1.1+)",
    "S14": "appProtocol is http or kubernetes.io/h2c (v1.4+)",
    "S15": "endpointPickerRef: port required when kind is Service or unset; the reference optional from v1.6",
    "S16": "selector.matchLabels holds 1..64 entries (v1.0.2+)",
    "S17": "status.parents: parentRef namespace pattern, controllerName pattern (v1.1+), atomic list",
    "D8": "appProtocol defaults to http (v1.4+)",
    "D9": "status parentRef group and kind defaulted; no default parent or condition in v1",
    "C14": "a Gateway in another namespace: the entry's parentRef.namespace names the Gateway's namespace",
    "C15": "a pool without endpointPickerRef: Accepted True, or Accepted False EndpointPickerRefMissing (v1.6+)",
    "C16": "an entry that carries controllerName carries the GatewayClass's controllerName (v1.1+)",
    "X1": "extensionRef to an ExternalName Service: ResolvedRefs False, InvalidExtensionRef",
    "X2": "a Service switched to ExternalName flips ResolvedRefs to False, and back",
    "X3": "no request is forwarded to the ExternalName target (traffic; T5)",
    # SPEC section 10, the traffic tier: requests through the gateway's data plane.
    "T1": "a request the endpoint picker steers to pod P is served by P, every time, also 100 at 10 at a time",
    "T2": "the gateway reports back the endpoint that served (x-conformance-test-served-endpoint names it)",
    "T3": "FailClose (the default): with the endpoint picker unavailable, requests are refused (5xx), never forwarded",
    "T4": "FailOpen: with the endpoint picker unavailable, requests are still served (200) by a Ready pod of the pool",
    "T5": "an endpoint picker reference to an ExternalName Service: no connection ever reaches its target, "
          "no request is served through it",
    "T6": "routing by rule, pool and Gateway; weighted backendRefs split within a binomial tolerance",
    "T7": "after the last route goes, requests get 404; a NotReady pod gets no new requests",
    "T8": "every targetPort is used as picked; h2c pools are reached over h2c; a picker Service without a port: 9002",
}


def matrix(items) -> dict[str, list[str]]:
    """Rule ID -> node IDs of the collected tests that name it."""
    out: dict[str, list[str]] = {rule: [] for rule in RULES}
    for item in items:
        for mark in item.iter_markers("rule"):
            for rule in mark.args:
                out.setdefault(rule, []).append(item.nodeid)
    return out


def format_matrix(m: dict[str, list[str]]) -> list[str]:
    lines = []
    for rule, tests in m.items():
        summary = RULES.get(rule, "UNKNOWN RULE")
        lines.append(f"{rule:4} {len(tests):4} test(s)  {summary}")
        lines += [f"       {t}" for t in tests]
    uncovered = [r for r, t in m.items() if not t]
    lines.append(f"{len(m) - len(uncovered)}/{len(m)} rules covered" +
                 (f"; uncovered: {', '.join(uncovered)}" if uncovered else ""))
    return lines
