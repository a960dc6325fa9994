"""Opening memory stores: independent stores per call, and URLs or options the engine refuses."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

import alkstore
from alkstore import InvalidOptions, ManualClock, Store
from alkstore.adapters.memory import MemoryEngine, MemoryTransaction, open_engine
from tests.support import must_claim


@pytest.mark.parametrize("url", ["memory://", "memory:///"])
def test_a_memory_url_opens_a_store_on_the_memory_engine(url: str) -> None:
    with alkstore.open(url) as store:
        assert isinstance(store, Store)
        assert isinstance(store.engine, MemoryEngine)
        assert repr(store) == "<alkstore.Store engine=MemoryEngine>"
    assert repr(store) == "<alkstore.Store engine=MemoryEngine closed>"


def test_each_open_returns_an_independent_empty_store(clock: ManualClock) -> None:
    with alkstore.open("memory://", clock=clock) as first, alkstore.open("memory://", clock=clock) as second:
        job_id = first.queue("q").enqueue({"n": 1})
        first.try_lock("l", "owner-a", 30)
        first.schedule("s", "@every 1m", "q")
        assert second.queue("q").claim("w") is None
        assert second.get_job(job_id) is None
        assert second.try_lock("l", "owner-b", 30) is not None
        assert second.schedules() == []
        job = must_claim(first.queue("q"))
        assert job.id == job_id


def test_the_memory_engine_is_the_engine_behind_the_memory_entry_point() -> None:
    (entry_point,) = metadata.entry_points(group="alkstore.engines", name="memory")
    assert entry_point.load() is open_engine
    assert isinstance(open_engine("memory://"), MemoryEngine)


@pytest.mark.parametrize(
    "url",
    ["memory://x", "memory://localhost", "memory://a/b", "memory://?name=x", "memory://#f", "memory:// "],
)
def test_a_memory_url_with_anything_after_the_scheme_is_refused(url: str) -> None:
    with pytest.raises(InvalidOptions, match="memory://"):
        alkstore.open(url)


@pytest.mark.parametrize("options", [{"schema": "x"}, {"max_size": 4}, {"migrate": True}])
def test_the_memory_engine_takes_no_options(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptions, match=next(iter(options))):
        alkstore.open("memory://", **options)


@pytest.mark.parametrize("url", ["redis://localhost", "mysql://localhost/x", "mem://", "memoryx://"])
def test_an_unknown_scheme_is_refused_naming_the_installed_engines(url: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        alkstore.open(url)
    message = str(info.value)
    assert repr(url.split("://")[0]) in message
    for engine in ("memory", "postgres", "postgresql"):
        assert engine in message


@pytest.mark.parametrize("url", ["memory", "", "memory:", None, 42, b"memory://"])
def test_something_that_is_not_a_url_is_refused(url: object) -> None:
    with pytest.raises(InvalidOptions, match="URL"):
        alkstore.open(url)  # type: ignore[arg-type]


def test_the_memory_engine_and_its_transactions_show_their_public_path(store: Store) -> None:
    assert repr(store.engine).startswith("<alkstore.adapters.memory.MemoryEngine ")
    with store.transaction() as tx:
        assert isinstance(tx, MemoryTransaction)
        assert repr(tx) == "<alkstore.adapters.memory.MemoryTransaction open, 0 enqueued>"
        store.enqueue_tx(tx, "q", 1)
        assert repr(tx) == "<alkstore.adapters.memory.MemoryTransaction open, 1 enqueued>"
    assert repr(tx).startswith("<alkstore.adapters.memory.MemoryTransaction committed")
