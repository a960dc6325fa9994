"""Fixtures of the async runtime's own tests: a scratch store per engine, opened on the test's loop.

Each test is a plain function that runs its ``async def`` body with ``asyncio.run``, so every
store, worker and task lives on one fresh event loop and nothing leaks between tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest

from alkstore import AsyncStore, Clock
from alkstore.testing import Scratch, open_scratch_async, scratch_engines
from tests.support import under_ci

__all__ = ["opened", "run"]

_ENGINES = {engine.name: engine for engine in scratch_engines()}


@pytest.fixture(
    params=[
        pytest.param(name, marks=[getattr(pytest.mark, mark) for mark in engine.marks])
        for name, engine in _ENGINES.items()
    ]
)
def scratch(request: pytest.FixtureRequest) -> Scratch:
    """Each engine's scratch in turn (a failure, not a skip, under CI when one cannot be had)."""
    provisioned = _ENGINES[request.param].provision()
    if isinstance(provisioned, str):
        if under_ci():
            pytest.fail(provisioned, pytrace=False)
        pytest.skip(provisioned)
    return provisioned


@asynccontextmanager
async def opened(scratch: Scratch, clock: Clock | None = None) -> AsyncIterator[AsyncStore]:
    """A fresh async store on ``scratch``'s engine (its clock unless one is given), closed and dropped after."""
    store, cleanup = await open_scratch_async(scratch, clock)
    try:
        yield store
    finally:
        await cleanup()


def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run an ``async def`` test body on a fresh event loop."""
    asyncio.run(body())
