"""The suite's one timeout configuration.

Names and defaults follow the upstream Gateway API conformance suite, so an
implementer's `--timeout-config-overrides` (`Name:seconds;Name:seconds`)
carries over. Waits never poll on a timer: they watch, and these are only the
upper bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class TimeoutConfig:
    CreateTimeout: float = 60
    DeleteTimeout: float = 30
    GetTimeout: float = 10
    GWCMustBeAccepted: float = 180
    GatewayMustHaveCondition: float = 180
    HTTPRouteMustHaveCondition: float = 60
    RouteMustHaveParents: float = 60
    HTTPRouteMustNotHaveParents: float = 60
    InferencePoolMustHaveCondition: float = 300
    InferencePoolMustNotHaveParent: float = 300
    NamespacesMustBeReady: float = 300
    MaxTimeToConsistency: float = 30
    # Ours, not upstream's: how long a wrong answer of the implementation must
    # stand still before a status wait ends early (at least; see docs/waiting.md).
    StatusSettleWindow: float = 5
    # Ours: how long a traffic behaviour that must last (FailClose with the
    # picker gone) is watched once it has begun (docs/traffic.md).
    TrafficHoldWindow: float = 2

    def with_overrides(self, spec: str) -> TimeoutConfig:
        """Apply `Name:seconds;Name:seconds`; ValueError names the bad part."""
        known = {f.name for f in fields(self)}
        changes: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            name, sep, value = part.partition(":")
            name = name.strip()
            if not sep:
                raise ValueError(f"{part!r} is not Name:seconds")
            if name not in known:
                raise ValueError(f"unknown timeout {name!r} (known: {', '.join(sorted(known))})")
            try:
                seconds = float(value.strip().removesuffix("s"))
            except ValueError:
                raise ValueError(f"timeout {name} has value {value.strip()!r}, which is not a number of "
                                 "seconds") from None
            if not 0 < seconds < 86400:
                raise ValueError(f"timeout {name} must be more than 0 and less than a day, not {seconds:g}")
            changes[name] = seconds
        return replace(self, **changes)
