"""Deliberate mistakes, for checking that the conformance suite catches them.

Each fault is one realistic bug, off unless named with `--fault NAME`, and is
wired at the single place where that bug would live, so switching it on makes
the implementation wrong in exactly that one way. A mutation run starts the
implementation once per fault and expects the suite to fail.
"""

from __future__ import annotations

from typing import Iterable

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
    "route-status-missing":
        "never writes HTTPRoute status",
    "no-invalid-ref-on-delete":
        "ignores Service deletions, so a deleted extension Service still counts as resolved",
    "keep-default-parent":
        "(revisions with a status default) keeps the placeholder parent next to its own Accepted entry",
    "no-default-parent-restore":
        "(revisions with a status default) leaves status.parent empty, without the placeholder, "
        "when it stops managing a pool",
}

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
