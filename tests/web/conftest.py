"""The dashboard's tests: its app over a scratch store of each engine, driven by Starlette's TestClient.

The store lives on one event loop (a blocking portal's thread) and every request runs on that
loop too, so a Postgres store's pool serves the app as it would under uvicorn. Seeding goes
through the same portal (``Served.call``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.testclient import TestClient

from alkstore import AsyncStore, Clock
from alkstore.adapters.web import TOKEN_VARIABLE, create_app
from alkstore.adapters.web._security import READ_TOKEN_VARIABLE
from alkstore.testing import Scratch, open_scratch_async, scratch_engines
from tests.support import under_ci

__all__ = ["Served", "serve"]

T = TypeVar("T")
_ENGINES = {engine.name: engine for engine in scratch_engines()}


@pytest.fixture(autouse=True)
def _no_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    monkeypatch.delenv(READ_TOKEN_VARIABLE, raising=False)


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


@dataclass
class Served:
    """A dashboard over ``store``, and the portal whose loop runs both."""

    store: AsyncStore
    portal: BlockingPortal
    options: dict[str, Any]

    def call(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await function(*args)`` on the store's loop."""
        return self.portal.call(function, *args)

    def client(self, base_url: str = "http://127.0.0.1", **options: Any) -> TestClient:
        """A client of a dashboard over the store, created with ``options`` (``create_app``'s), asking
        ``base_url`` (whose host is the requests' ``Host``) with that ``Origin``, as the dashboard's pages do."""
        client = TestClient(create_app(self.store, **(self.options | options)), base_url=base_url)
        client.headers["Origin"] = base_url
        client.portal = self.portal  # every request on the store's loop (the client opens no portal of its own)
        return client


def serve(scratch: Scratch, clock: Clock | None = None, **options: Any) -> Iterator[Served]:
    with start_blocking_portal() as portal:
        store, cleanup = portal.call(open_scratch_async, scratch, clock)
        try:
            yield Served(store, portal, options)
        finally:
            portal.call(cleanup)


@pytest.fixture
def served(scratch: Scratch) -> Iterator[Served]:
    """A fresh store of each engine, its dashboard's clients on its loop."""
    yield from serve(scratch)
