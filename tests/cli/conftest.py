"""The command line's tests never see an ``ALKSTORE_URL`` of the environment they run in; a memory store the
commands share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from alkstore import ManualClock, Store
from alkstore.adapters.cli import URL_VARIABLE, _operate
from alkstore.adapters.memory import MemoryEngine
from tests.support import MIDNIGHT


@pytest.fixture(autouse=True)
def _no_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)


class KeptOpen(MemoryEngine):
    """A memory engine that outlives the stores the commands open and close over it."""

    def close(self) -> None:
        """Each command closes its store; the engine stays for the next command and the test."""


@dataclass
class Prepared:
    store: Store
    clock: ManualClock
    ids: dict[str, int]


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Prepared:
    """Every command opens a store over one memory engine, on a manual clock at midnight."""
    engine = KeptOpen()
    clock = ManualClock(MIDNIGHT)

    def open_shared(url: str, schema: str | None, **options: Any) -> Store:
        assert url == "memory://"
        return Store(engine, clock=clock)

    monkeypatch.setattr(_operate, "open_store", open_shared)
    return Prepared(Store(engine, clock=clock), clock, {})
