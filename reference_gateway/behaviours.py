"""Benign behaviours: conformant, but unusual, as real third-party controllers behave.

Each behaviour is off unless named with `--behaviour NAME` and is wired at the
single place where it lives, like the faults of `faults.py`. Unlike a fault,
switching one on must not make the implementation wrong: every status it writes
still obeys the API. A run with a behaviour on checks that the conformance suite
does not mistake unusual-but-conformant for wrong (no test may fail).
Every behaviour works the same on both InferencePool APIs ("status.parent" is
`status.parents` in `inference.networking.k8s.io/v1`).
"""

from __future__ import annotations

from collections.abc import Iterable

BEHAVIOURS: dict[str, str] = {
    "eager-writer":
        "writes status on every InferencePool the moment it appears or changes, routed or not, in any "
        "namespace (an empty status.parent, or status.parents in v1, where it had none; the placeholder of a "
        "revision with a status default removed from pools it never managed), and rewrites any pool status "
        "that differs",
    "slow":
        "every status write comes --slow-seconds (default 30) after the event that calls for it, "
        "computed from the state at write time",
    "reordered-conditions":
        "writes conditions in reverse order (ResolvedRefs before Accepted, Programmed before Accepted)",
    "extra-conditions":
        "adds the condition types example.com/Programmed and Reconciled (True) beside the known ones "
        "on pool and route entries",
    "frequent-rewrites":
        "rewrites the status of every pool and route it manages every --rewrite-seconds (default 1); "
        "only the condition messages change (they carry the number of the rewrite round)",
    "no-placeholder-restore":
        "(revisions with a status default, i.e. v0.5) leaves status.parent empty when it stops managing a "
        "pool, without putting the placeholder back (what GIE v0.5.x's own conformance test demands); "
        "with any other revision (the seed, v0.2 - v0.4, every v1 revision) there is no placeholder, the "
        "list is left empty anyway, and it changes nothing",
    "lagging-cache":
        "reads through caches that lag, as informers can: each watched resource's changes reach its cache "
        "late, each resource by a different share of --cache-lag-seconds (default 1; the first a share, "
        "the last all of it), so the cache seldom holds a state the API server ever held; status is "
        "computed from it as ever",
    "slow-dataplane":
        "the data plane picks up each change --slow-seconds late: Envoy's configuration is rewritten that "
        "long after the change that calls for it, from the state at that time (status is not delayed)",
}
# The behaviours of the data plane: only a run with traffic shows them.
TRAFFIC = frozenset({"slow-dataplane"})

DEFAULT_SLOW_SECONDS = 30.0
DEFAULT_REWRITE_SECONDS = 1.0
DEFAULT_CACHE_LAG_SECONDS = 1.0

_active: frozenset[str] = frozenset()
_slow_seconds: float = DEFAULT_SLOW_SECONDS
_rewrite_seconds: float = DEFAULT_REWRITE_SECONDS
_cache_lag_seconds: float = DEFAULT_CACHE_LAG_SECONDS
_rewrite_round = 0


def activate(names: Iterable[str], *, slow_seconds: float = DEFAULT_SLOW_SECONDS,
             rewrite_seconds: float = DEFAULT_REWRITE_SECONDS,
             cache_lag_seconds: float = DEFAULT_CACHE_LAG_SECONDS) -> None:
    """Switch on exactly `names` (and switch off all others)."""
    global _active, _slow_seconds, _rewrite_seconds, _rewrite_round, _cache_lag_seconds
    names = frozenset(names)
    unknown = names - BEHAVIOURS.keys()
    if unknown:
        raise ValueError(f"unknown behaviour(s): {', '.join(sorted(unknown))}")
    if slow_seconds < 0:
        raise ValueError(f"--slow-seconds must not be negative, not {slow_seconds:g}")
    if rewrite_seconds <= 0:
        raise ValueError(f"--rewrite-seconds must be more than 0, not {rewrite_seconds:g}")
    if cache_lag_seconds < 0:
        raise ValueError(f"--cache-lag-seconds must not be negative, not {cache_lag_seconds:g}")
    _active, _slow_seconds, _rewrite_seconds, _rewrite_round = names, slow_seconds, rewrite_seconds, 0
    _cache_lag_seconds = cache_lag_seconds


def on(name: str) -> bool:
    """Is behaviour `name` switched on? (A typo here is a bug, so it raises.)"""
    if name not in BEHAVIOURS:
        raise KeyError(name)
    return name in _active


def active() -> frozenset[str]:
    return _active


def write_delay() -> float:
    """Seconds between an event and the reconcile (and status write) it calls for."""
    return _slow_seconds if on("slow") else 0.0


def dataplane_delay() -> float:
    """Seconds between a change and the data plane's configuration that follows it."""
    return _slow_seconds if on("slow-dataplane") else 0.0


def cache_lag(index: int, count: int) -> float:
    """lagging-cache: seconds the changes of the index-th of `count` watched resources reach the cache late."""
    return _cache_lag_seconds * (index + 1) / count if on("lagging-cache") else 0.0


def rewrite_seconds() -> float:
    """frequent-rewrites: seconds between two rounds of rewriting every managed object."""
    return _rewrite_seconds


def rewrite_round() -> int:
    """frequent-rewrites: the current round, which the condition messages carry."""
    return _rewrite_round


def next_rewrite_round() -> int:
    global _rewrite_round
    _rewrite_round += 1
    return _rewrite_round
