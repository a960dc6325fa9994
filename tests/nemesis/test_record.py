"""The recorded steps on each engine: a small run with a lapsed lease and a burial checks clean."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import alkstore

from . import record
from .checker import check
from .harness import read_snapshot
from .history import HistoryWriter, Kind, load_history
from .model import PARAMS


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[alkstore.Store]:
    """A store on the memory engine, or on a fresh schema of the test server."""
    if request.param == "memory":
        with alkstore.open("memory://") as memory:
            yield memory
        return
    dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    with alkstore.open(dsn, schema=schema, migrate=True, min_size=0, max_size=2) as postgres:
        yield postgres


def test_a_recorded_run_with_a_refused_stale_ack_and_a_burial_checks_clean(
    store: alkstore.Store, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    with (
        HistoryWriter(history, "producer") as producer,
        HistoryWriter(history, "worker-a") as a,
        HistoryWriter(history, "worker-b") as b,
    ):
        store.queue("q").configure(visibility_timeout=0.2)
        done = record.enqueue(producer, store, "q", "t1")
        slow = record.enqueue(producer, store, "q", "t2")
        rolled_back = record.enqueue(producer, store, "q", "t3", commit=False)
        doomed = record.enqueue(producer, store, "q", "t4", max_attempts=1)

        job = record.claim(a, store, "q")
        assert job is not None
        assert job.id == done
        record.run(a, job, lambda: None)
        assert record.ack(a, job)

        stalled = record.claim(a, store, "q")
        assert stalled is not None
        assert stalled.id == slow
        record.run(a, stalled, lambda: time.sleep(0.3))  # past its lease
        again = record.claim(b, store, "q")
        assert again is not None
        assert again.id == slow
        assert not record.ack(a, stalled)
        record.run(b, again, lambda: None)
        assert record.ack(b, again)

        last = record.claim(b, store, "q")
        assert last is not None
        assert last.id == doomed
        record.run(b, last, lambda: None)
        assert record.retry(b, last, "boom")
        assert record.claim(b, store, "q") is None

        snapshot = read_snapshot(store, ["q"], [])
        producer.log(Kind.SNAPSHOT)
    events = load_history(history)
    assert snapshot.dead == {doomed}
    assert [e.kind for e in events if e.job == rolled_back] == [Kind.ENQUEUE_ROLLED_BACK]
    assert [(e.job, e.worker, e.fence, e.ok) for e in events if e.kind is Kind.ACK and e.ok is not None] == [
        (done, "worker-a", 1, True),
        (slow, "worker-a", 1, False),
        (slow, "worker-b", 2, True),
    ]
    assert any(e.kind is Kind.BURY and e.job == doomed for e in events)
    assert check(events, snapshot, PARAMS) == []
