"""Which path an enqueue of one job takes: a plain job on a pooled connection (the peer table's A)
goes straight to its one statement, without the batch's scans for parents and keys; a job with
parents, a key, or the caller's transaction still takes its own path."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import EnqueueOpts, Store
from alkstore.adapters.postgres import _dependencies, _engine

pytestmark = pytest.mark.postgres

QUEUE = "enqueue_path"


def paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which of the engine's insert paths each enqueue takes: "keyed", "parents", or "insert" (a
    statement on a connection of the caller's or of a batch); the one plain job's straight path records none."""
    taken: list[str] = []
    engine = _engine.PostgresEngine

    def spied(name: str, real: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            taken.append(name)
            return real(*args, **kwargs)

        return spy

    monkeypatch.setattr(engine, "_insert_keyed", spied("keyed", engine._insert_keyed))
    monkeypatch.setattr(engine, "_insert", spied("insert", engine._insert))
    monkeypatch.setattr(_engine, "insert_with_parents", spied("parents", _dependencies.insert_with_parents))
    return taken


def test_one_plain_job_is_not_scanned(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = store.queue(QUEUE)
    queue.enqueue({"warm": True})  # the queue's channel remembered
    taken = paths(monkeypatch)
    job_id = queue.enqueue({"n": 1})
    assert taken == []
    job = store.get_job(job_id)
    assert job is not None
    assert job.payload == {"n": 1}


@pytest.mark.parametrize("kind", ["unique", "ordering", "after", "transaction"])
def test_other_single_jobs_take_their_own_path(store: Store, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    queue = store.queue(QUEUE)
    parent = queue.enqueue({"parent": True})
    taken = paths(monkeypatch)
    options: dict[str, dict[str, Any]] = {
        "unique": {"unique_key": f"u-{parent}"},
        "ordering": {"ordering_key": f"o-{parent}"},
        "after": {"after": [parent]},
        "transaction": {},
    }
    opts = options[kind]
    if kind == "transaction":
        with store.transaction() as tx:
            first = store.enqueue_tx(tx, QUEUE, {"kind": kind})
    else:
        first = queue.enqueue({"kind": kind}, EnqueueOpts(**opts))
    assert taken == [{"unique": "keyed", "ordering": "keyed", "after": "parents", "transaction": "insert"}[kind]]
    if kind == "unique":  # the keyed path found the key held: the same job again
        again = queue.enqueue({"kind": kind}, EnqueueOpts(**opts))
        assert again == first
        assert not again.created
    if kind == "after":  # the dependent path left the child waiting on its parent
        child = store.get_job(first)
        assert child is not None
        assert child.waiting_on == (parent,)
