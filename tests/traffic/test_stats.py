"""The weighted-split tolerance: a correct split is judged wrong at most once in a million runs, the
range is the narrowest that promises it, and a split that ignores the weights is caught."""

import math

import pytest

from conformance.traffic.stats import FALSE_FAILURE, accepted, detectable_shift, pmf


@pytest.mark.parametrize("n", [1, 10, 100, 200, 1000])
def test_pmf_sums_to_one(n):
    assert math.isclose(sum(pmf(n, 0.3)), 1.0, rel_tol=1e-9)


@pytest.mark.parametrize("n,share", [(100, 0.7), (200, 0.9), (200, 0.5), (1000, 0.25), (50, 0.0), (50, 1.0)])
def test_a_correct_split_falls_outside_at_most_once_in_a_million(n, share):
    bounds = accepted(n, share)
    outside = sum(p for k, p in enumerate(pmf(n, share)) if k not in bounds)
    assert outside <= FALSE_FAILURE
    assert math.isclose(outside, bounds.false_failure, rel_tol=1e-6, abs_tol=1e-15)
    assert bounds.low <= round(n * share) <= bounds.high


@pytest.mark.parametrize("n,share", [(100, 0.7), (200, 0.9), (1000, 0.25)])
def test_the_range_is_the_narrowest_that_keeps_the_promise(n, share):
    bounds = accepted(n, share)
    probs = pmf(n, share)
    below = sum(probs[:bounds.low])
    above = sum(probs[bounds.high + 1:])
    # Giving up one more count on either side would spend more than that tail's half of the budget.
    assert below + probs[bounds.low] > FALSE_FAILURE / 2
    assert above + probs[bounds.high] > FALSE_FAILURE / 2


def test_a_split_that_ignores_weights_is_caught():
    """90/10 weights over 200 requests: an even split lands far outside the range."""
    bounds = accepted(200, 0.9)
    caught = sum(p for k, p in enumerate(pmf(200, 0.5)) if k not in bounds)
    assert caught > 1 - 1e-12, bounds.describe()
    assert detectable_shift(200, 0.9, power=0.99) < 0.1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="n must be"):
        accepted(0, 0.5)
    with pytest.raises(ValueError, match="share must be"):
        accepted(10, 1.5)
