"""How many of n requests a weighted split may send to a backend before the split is judged wrong.

A gateway that splits traffic 70/30 by backendRef weights sends each request independently (or
close to it), so the count a backend receives out of n requests is binomial. A fixed tolerance
("within 10 %") either fails a correct gateway now and then or passes a wrong one; upstream's way
around that, random warm-up rounds until the figures look right, costs minutes. Here the accepted
range is computed from n and the expected share so that a correct gateway falls outside it with
probability at most `FALSE_FAILURE` (one in a million, split between the two tails), and the range
is as narrow as that allows. A gateway whose split is off by more than the range's half-width is
caught; `detectable_shift` says by how much a share must be off to be caught most of the time.

Pure arithmetic on exact binomial tails (log-space, no floating underflow for n in the thousands).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FALSE_FAILURE = 1e-6  # the most often a correct split may be judged wrong


def _log_pmf(n: int, k: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def pmf(n: int, p: float) -> list[float]:
    """P(X = k) for k = 0..n, X ~ Binomial(n, p)."""
    return [math.exp(_log_pmf(n, k, p)) for k in range(n + 1)]


@dataclass(frozen=True)
class Range:
    """Counts from `low` to `high` (both inclusive) are accepted out of `n` at expected share `share`."""

    n: int
    share: float
    low: int
    high: int
    false_failure: float  # the exact probability that a correct split falls outside

    def __contains__(self, count: int) -> bool:
        return self.low <= count <= self.high

    def describe(self) -> str:
        return (f"{self.low}..{self.high} of {self.n} (expected {self.share * self.n:.0f}; a correct split "
                f"falls outside with probability {self.false_failure:.1e})")


def accepted(n: int, share: float, false_failure: float = FALSE_FAILURE) -> Range:
    """The narrowest two-sided range whose tails each hold at most half of `false_failure`."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be within 0..1, not {share}")
    probs = pmf(n, share)
    tail = false_failure / 2
    low, below = 0, 0.0
    while low < n and below + probs[low] <= tail:
        below += probs[low]
        low += 1
    high, above = n, 0.0
    while high > 0 and above + probs[high] <= tail:
        above += probs[high]
        high -= 1
    return Range(n=n, share=share, low=low, high=high, false_failure=below + above)


def detectable_shift(n: int, share: float, power: float = 0.99, false_failure: float = FALSE_FAILURE) -> float:
    """The smallest shift d of the true share (upwards) that puts the count outside the range with
    probability at least `power`: what a run of n requests can tell apart from `share`."""
    bounds = accepted(n, share, false_failure)
    step = 1.0 / (4 * n)
    shifted = share
    while shifted < 1.0:
        shifted = min(1.0, shifted + step)
        caught = sum(p for k, p in enumerate(pmf(n, shifted)) if k not in bounds)
        if caught >= power:
            return shifted - share
    return 1.0 - share
