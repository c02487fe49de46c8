"""The one place for reading and judging status conditions.

Only "latest" conditions count: a condition that carries observedGeneration
must carry the object's current metadata.generation (rule C4), so a stale
condition from before a spec change never satisfies a wait.

The `judge_*` functions say more than yes or no: a `Judgement` names the
status entry nearest to the one the rule wants and each field in which it
differs (value seen, value wanted), and whether the implementation has
answered at all (an entry whose conditions are at the current generation).
`wait_for` prints the first and uses the second to end a wait early once a
wrong answer has settled (see docs/waiting.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .revisions import APIS, Revision


@dataclass(frozen=True)
class Judgement:
    """What a wait saw of the rule: nothing wrong (`problems` empty), or each difference."""

    problems: tuple[str, ...]
    # The implementation has written the entry the rule is about (or the nearest
    # thing to it) at the object's current generation: what it says is its answer.
    answered: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @staticmethod
    def of(ok: bool, expected: str) -> Judgement:
        """A yes/no check as a Judgement: it never counts as an answer."""
        return Judgement(() if ok else (f"not yet: {expected}",))


def judge_any(*judges: Callable[[dict | None], Judgement]) -> Callable[[dict | None], Judgement]:
    """Holds when any of the judges holds; else the first one's verdict (its problems and answer)."""
    def judge(obj: dict | None) -> Judgement:
        verdicts = [j(obj) for j in judges]
        return next((v for v in verdicts if v.ok), verdicts[0])
    return judge


def find(conditions: list[dict] | None, ctype: str) -> dict | None:
    return next((c for c in conditions or [] if c.get("type") == ctype), None)


def is_latest(condition: dict, generation: int | None) -> bool:
    og = condition.get("observedGeneration")
    return og is None or generation is None or og == generation


def matches(condition: dict | None, status: str, reason: str | None, generation: int | None) -> bool:
    return (condition is not None and condition.get("status") == status
            and (reason is None or condition.get("reason") == reason) and is_latest(condition, generation))


# -- InferencePool status.parent (v1alpha2) / status.parents (v1) -----------------


def status_key(pool: dict | None) -> str:
    """The name of the pool's list of parent entries, as its API spells it."""
    api = next((a for a in APIS.values() if a.api_version == (pool or {}).get("apiVersion")), None)
    if api is not None:
        return api.status_key
    status = (pool or {}).get("status") or {}
    return "parents" if "parents" in status else "parent"


def pool_parents(pool: dict | None) -> list[dict]:
    """The pool's status parent entries, whichever API it is of (empty when it has none)."""
    return ((pool or {}).get("status") or {}).get(status_key(pool)) or []


def _pool_namespace(pool: dict | None) -> str | None:
    return ((pool or {}).get("metadata") or {}).get("namespace")


def pool_parent(pool: dict | None, revision: Revision, gateway: str, namespace: str) -> dict | None:
    """The status parent entry naming Gateway namespace/gateway, if any."""
    return next((p for p in pool_parents(pool) if not revision.parent_ref_differences(
        p.get("parentRef") or {}, gateway, namespace, _pool_namespace(pool))), None)


def pool_condition(revision: Revision, gateway: str, namespace: str, ctype: str, status: str,
                   reason: str | None = None) -> Callable[[dict | None], bool]:
    """Predicate: the pool's entry for the Gateway has the latest condition ctype=status (reason)."""
    def check(pool: dict | None) -> bool:
        entry = pool_parent(pool, revision, gateway, namespace)
        gen = (pool or {}).get("metadata", {}).get("generation")
        return entry is not None and matches(find(entry.get("conditions"), ctype), status, reason, gen)
    return check


def describe(ctype: str, status: str, reason: str | None, gateway: str, namespace: str,
             key: str = "parent") -> str:
    return (f"status.{key} entry for Gateway {namespace}/{gateway} with condition {ctype}={status}"
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


# -- judging, with the differences named -------------------------------------------


def _show(value) -> str:
    return "absent" if value is None else f"{value!r}" if isinstance(value, str) else str(value)


def _generation(obj: dict | None) -> int | None:
    return ((obj or {}).get("metadata") or {}).get("generation")


def condition_problems(conds: list[dict] | None, ctype: str, status: str, reason: str | None,
                       generation: int | None, owner: str, *, generation_required: bool = False) -> list[str]:
    """How the latest condition `ctype` of an entry differs from `ctype`=`status` (`reason`).

    A condition without observedGeneration passes (SPEC C4: those that carry it must
    match), unless `generation_required`: Gateway API's conformance counts a route
    condition without it as stale, and so does this suite."""
    cond = find(conds, ctype)
    if cond is None:
        types = ", ".join(str(c.get("type")) for c in conds or []) or "none"
        return [f"{owner} has no condition {ctype} (its conditions: {types})"]
    problems = []
    if cond.get("status") != status:
        problems.append(f"{owner} has condition {ctype} {_show(cond.get('status'))} (reason "
                        f"{_show(cond.get('reason'))}) where the rule wants {status}"
                        + (f" with reason {reason!r}" if reason else ""))
    elif reason is not None and cond.get("reason") != reason:
        problems.append(f"{owner} has condition {ctype} {status} with reason {_show(cond.get('reason'))} "
                        f"where the rule wants reason {reason!r}")
    if not is_latest(cond, generation):
        problems.append(f"{owner} has condition {ctype} at observedGeneration {cond.get('observedGeneration')} "
                        f"where the object is at generation {generation}")
    elif generation_required and generation is not None and cond.get("observedGeneration") is None:
        problems.append(f"{owner} has condition {ctype} with observedGeneration absent where the rule wants "
                        f"{generation}, the object's generation")
    return problems


def _all_latest(conds: list[dict] | None, generation: int | None) -> bool:
    return bool(conds) and all(is_latest(c, generation) for c in conds)


def _nearest(entries: list[dict], differences: Callable[[dict], list[str]]) -> tuple[dict | None, list[str]]:
    """The entry whose parentRef differs from the wanted one in the fewest fields, and those fields."""
    best, best_diffs = None, []
    for e in entries:
        diffs = differences(e.get("parentRef") or {})
        if best is None or len(diffs) < len(best_diffs):
            best, best_diffs = e, diffs
    return best, best_diffs


def implementation_entries(pool: dict | None, revision: Revision, ignore: list[dict] = ()) -> list[dict]:
    """Pool entries that may be the implementation's: not the CRD's placeholder, not written by the suite."""
    return [p for p in pool_parents(pool) if not revision.is_default_parent(p) and p not in ignore]


def judge_pool_condition(revision: Revision, gateway: str, namespace: str, ctype: str, status: str,
                         reason: str | None = None, *, ignore: list[dict] = ()) -> Callable[[dict | None], Judgement]:
    """The pool's entry for Gateway namespace/gateway has the latest condition ctype=status (reason)."""
    where = f"Gateway {namespace}/{gateway}"

    def judge(pool: dict | None) -> Judgement:
        if pool is None:
            return Judgement(("the InferencePool does not exist",))
        gen = _generation(pool)
        entries = implementation_entries(pool, revision, ignore)
        entry, ref_diffs = _nearest(entries, lambda ref: revision.parent_ref_differences(
            ref, gateway, namespace, _pool_namespace(pool)))
        if entry is None:
            return Judgement((f"status.{status_key(pool)} has no entry from an implementation "
                              f"(wanted: one for {where})",))
        # Only an entry carrying the Gateway's name answers for it: an entry for
        # another Gateway says nothing about when this one's will come.
        answered = _all_latest(entry.get("conditions"), gen) and (entry.get("parentRef") or {}).get("name") == gateway
        if ref_diffs:
            return Judgement((f"the entry nearest to {where} has " + "; ".join(ref_diffs),), answered)
        problems = condition_problems(entry.get("conditions"), ctype, status, reason, gen, f"the entry for {where}")
        return Judgement(tuple(problems), answered)
    return judge


def judge_no_pool_parent(revision: Revision, gateway: str, namespace: str) -> Callable[[dict | None], Judgement]:
    """The pool exists and has no entry for Gateway namespace/gateway."""
    def judge(pool: dict | None) -> Judgement:
        if pool is None:
            return Judgement(("the InferencePool does not exist",))
        entry = pool_parent(pool, revision, gateway, namespace)
        if entry is None:
            return Judgement(())
        conds = ", ".join(f"{c.get('type')}={c.get('status')}" for c in entry.get("conditions") or [])
        return Judgement((f"the entry for Gateway {namespace}/{gateway} is still there ({conds or 'no conditions'})",),
                         True)
    return judge


def route_ref_differences(ref: dict, gateway: str, namespace: str) -> list[str]:
    """How an HTTPRoute status parentRef differs from one naming Gateway namespace/gateway."""
    wanted = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway, "namespace": namespace}
    seen = {"group": ref.get("group", "gateway.networking.k8s.io"), "kind": ref.get("kind", "Gateway"),
            "name": ref.get("name"), "namespace": ref.get("namespace", namespace)}
    return [f"parentRef.{k} {_show(seen[k])} where the rule wants {wanted[k]!r}"
            for k in wanted if seen[k] != wanted[k]]


def judge_route_condition(gateway: str, namespace: str, ctype: str, status: str, reason: str | None = None,
                          ) -> Callable[[dict | None], Judgement]:
    """The route's status.parents entry for the Gateway has the latest condition ctype=status (reason),
    carrying the route's generation as its observedGeneration."""
    where = f"Gateway {namespace}/{gateway}"

    def judge(route: dict | None) -> Judgement:
        if route is None:
            return Judgement(("the HTTPRoute does not exist",))
        gen = _generation(route)
        entries = ((route.get("status") or {}).get("parents")) or []
        entry, ref_diffs = _nearest(entries, lambda ref: route_ref_differences(ref, gateway, namespace))
        if entry is None:
            return Judgement((f"status.parents has no entry (wanted: one for {where})",))
        answered = _all_latest(entry.get("conditions"), gen) and (entry.get("parentRef") or {}).get("name") == gateway
        if ref_diffs:
            return Judgement((f"the entry nearest to {where} has " + "; ".join(ref_diffs),), answered)
        problems = condition_problems(entry.get("conditions"), ctype, status, reason, gen, f"the entry for {where}",
                                      generation_required=True)
        return Judgement(tuple(problems), answered)
    return judge
