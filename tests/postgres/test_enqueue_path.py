"""Which path an enqueue of one job takes: a plain job on a pooled connection (the peer table's A)
goes straight to its one statement, without the batch's scans for parents and keys; a job with
parents, a key, or the caller's transaction still takes its own path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from alkstore import EnqueueOpts, Store
from alkstore.adapters.postgres import _dependencies, _engine
from alkstore.engine import NewJob

pytestmark = pytest.mark.postgres

QUEUE = "enqueue_path"


def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record each batch scan for parents (the size of the batch scanned), as the engine runs it."""
    scanned: list[int] = []

    def has_parents(jobs: Sequence[NewJob]) -> bool:
        scanned.append(len(jobs))
        return _dependencies.has_parents(jobs)

    monkeypatch.setattr(_engine, "has_parents", has_parents)
    return scanned


def test_one_plain_job_is_not_scanned(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = store.queue(QUEUE)
    queue.enqueue({"warm": True})  # the queue's channel remembered
    scanned = scans(monkeypatch)
    job_id = queue.enqueue({"n": 1})
    assert scanned == []
    job = store.get_job(job_id)
    assert job is not None
    assert job.payload == {"n": 1}


@pytest.mark.parametrize("kind", ["unique", "ordering", "after", "transaction"])
def test_other_single_jobs_take_their_own_path(store: Store, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    queue = store.queue(QUEUE)
    parent = queue.enqueue({"parent": True})
    scanned = scans(monkeypatch)
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
    assert scanned == [1]
    if kind == "unique":  # the keyed path found the key held: the same job again
        again = queue.enqueue({"kind": kind}, EnqueueOpts(**opts))
        assert again == first
        assert not again.created
    if kind == "after":  # the dependent path left the child waiting on its parent
        child = store.get_job(first)
        assert child is not None
        assert child.waiting_on == (parent,)
