"""Fixtures for the reference gateway's tests."""

from __future__ import annotations

import pytest

from reference_gateway import behaviours, faults

from .objects import Objects


@pytest.fixture
def objs() -> Objects:
    return Objects()


@pytest.fixture(autouse=True)
def no_faults():
    faults.activate([])
    behaviours.activate([])
    yield
    faults.activate([])
    behaviours.activate([])
