"""Fixtures for the memory engine's own tests: a manual clock and a store on it, always closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import alkstore
from alkstore import ManualClock, Store
from tests.support import MIDNIGHT

T0 = MIDNIGHT


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test moves it, starting at 2030-01-01T00:00Z."""
    return ManualClock(T0)


@pytest.fixture
def store(clock: ManualClock) -> Iterator[Store]:
    """A fresh, private memory store on ``clock``."""
    store = alkstore.open("memory://", clock=clock)
    yield store
    store.close()
