"""Fixtures for the reference gateway's tests."""

from __future__ import annotations

import pytest

from reference_gateway import behaviours, faults

from .objects import TESTED, Objects


@pytest.fixture(params=TESTED)
def objs(request) -> Objects:
    """Objects of each tested API revision in turn: the generic tests run under every one."""
    return Objects(request.param)


@pytest.fixture
def seed() -> Objects:
    return Objects("seed")


@pytest.fixture
def v05() -> Objects:
    return Objects("v0.5")


@pytest.fixture(autouse=True)
def no_faults():
    faults.activate([])
    behaviours.activate([])
    yield
    faults.activate([])
    behaviours.activate([])
