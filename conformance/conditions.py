"""The one place for reading and judging status conditions.

Only "latest" conditions count: a condition that carries observedGeneration
must carry the object's current metadata.generation (rule C4), so a stale
condition from before a spec change never satisfies a wait.
"""

from __future__ import annotations

from typing import Callable

from .revisions import Revision


def find(conditions: list[dict] | None, ctype: str) -> dict | None:
    return next((c for c in conditions or [] if c.get("type") == ctype), None)


def is_latest(condition: dict, generation: int | None) -> bool:
    og = condition.get("observedGeneration")
    return og is None or generation is None or og == generation


def matches(condition: dict | None, status: str, reason: str | None, generation: int | None) -> bool:
    return (condition is not None and condition.get("status") == status
            and (reason is None or condition.get("reason") == reason) and is_latest(condition, generation))


# -- InferencePool status.parent ------------------------------------------------


def pool_parents(pool: dict | None) -> list[dict]:
    return ((pool or {}).get("status") or {}).get("parent") or []


def pool_parent(pool: dict | None, revision: Revision, gateway: str, namespace: str) -> dict | None:
    """The status.parent entry naming Gateway namespace/gateway, if any."""
    return next((p for p in pool_parents(pool) if revision.names_gateway(p.get("parentRef") or {}, gateway, namespace)),
                None)


def pool_condition(revision: Revision, gateway: str, namespace: str, ctype: str, status: str,
                   reason: str | None = None) -> Callable[[dict | None], bool]:
    """Predicate: the pool's entry for the Gateway has the latest condition ctype=status (reason)."""
    def check(pool: dict | None) -> bool:
        entry = pool_parent(pool, revision, gateway, namespace)
        gen = (pool or {}).get("metadata", {}).get("generation")
        return entry is not None and matches(find(entry.get("conditions"), ctype), status, reason, gen)
    return check


def describe(ctype: str, status: str, reason: str | None, gateway: str, namespace: str) -> str:
    return (f"status.parent entry for Gateway {namespace}/{gateway} with condition {ctype}={status}"
            + (f" reason {reason}" if reason else "") + " at the current generation")


# -- HTTPRoute status.parents -------------------------------------------------


def route_parent(route: dict | None, gateway: str, controller: str | None = None) -> dict | None:
    for p in ((route or {}).get("status") or {}).get("parents") or []:
        ref = p.get("parentRef") or {}
        if ref.get("name") == gateway and ref.get("kind", "Gateway") == "Gateway" and (
                controller is None or p.get("controllerName") == controller):
            return p
    return None


def route_condition(gateway: str, ctype: str, status: str, reason: str | None = None,
                    controller: str | None = None) -> Callable[[dict | None], bool]:
    def check(route: dict | None) -> bool:
        entry = route_parent(route, gateway, controller)
        gen = (route or {}).get("metadata", {}).get("generation")
        return entry is not None and matches(find(entry.get("conditions"), ctype), status, reason, gen)
    return check
