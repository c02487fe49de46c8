"""SHOULDs: what the API recommends, checked and reported, never failed.

Why: a few promises of the API are SHOULDs, such as the seed's `extensionRef.portNumber` ("When
unspecified, implementations SHOULD infer a default value of 9002 when the Kind is Service"). A
conformance verdict must not rest on them, yet an implementer wants to know where theirs differs from
what the API recommends, and said as exactly as a failure would be.

A test checks a SHOULD inside `with should("what"):` (the `should` fixture). An assertion that fails
inside it ends that block only: the test goes on, and passes if its MUSTs hold. The first line of the
assertion is kept as the test's user property `should-not-met` (JUnit, Allure and the HTML report show
it), the run's summary lists it under "SHOULD not met", and pytest's warnings summary shows it too.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PROPERTY = "should-not-met"


class ShouldNotMet(UserWarning):
    """A SHOULD of the API that the implementation does not meet (reported, not failed)."""


class Should:
    """Checks of SHOULDs for one test (the `should` fixture)."""

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.not_met: list[str] = []

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        """Run the block as the check of the SHOULD `what`; an AssertionError in it is reported."""
        try:
            yield
        except AssertionError as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            line = f"{what}: {first}"
            self.not_met.append(line)
            self.item.user_properties.append((PROPERTY, line))
            warnings.warn(ShouldNotMet(f"{self.item.name}: SHOULD not met: {line}"), stacklevel=3)
