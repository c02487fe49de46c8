"""`should` blocks: an assertion failing in one is kept as the test's `should-not-met` property and a
ShouldNotMet warning, and ends that block only; anything else passes through."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.should import PROPERTY, Should, ShouldNotMet


def item():
    return SimpleNamespace(name="test_default_picker_port[v1alpha2]", user_properties=[])


def test_a_failed_check_is_reported_and_the_test_goes_on():
    it, went_on = item(), False
    should = Should(it)
    with pytest.warns(ShouldNotMet, match=r"^test_default_picker_port\[v1alpha2\]: SHOULD not met: T8: port 9002: "
                                          r"wanted 200 from pod-0$"):
        with should("T8: port 9002"):
            raise AssertionError("wanted 200 from pod-0\nmore detail")
        went_on = True
    assert went_on
    assert it.user_properties == [(PROPERTY, "T8: port 9002: wanted 200 from pod-0")]
    assert should.not_met == ["T8: port 9002: wanted 200 from pod-0"]


def test_a_met_check_reports_nothing(recwarn):
    it = item()
    with Should(it)("T8: port 9002"):
        pass
    assert it.user_properties == [] and not recwarn.list


def test_errors_that_are_not_assertions_still_fail_the_test():
    it = item()
    with pytest.raises(TimeoutError), Should(it)("T8: port 9002"):
        raise TimeoutError("the cluster did not answer")
    assert it.user_properties == []
