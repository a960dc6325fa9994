"""The action log (``Store.log_action``, ``Store.actions``): entries appended with the store's clock and
listed newest first a page at a time, texts kept as given, bad input refused before anything is written;
entries older than a worker's ``action_retention`` deleted by its upkeep, a bounded batch at a time, or by
``Store.purge_actions`` (``alkstore prune``)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from alkstore import (
    DEFAULT_ACTION_RETENTION,
    ActionInfo,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    ManualClock,
    StopToken,
    Store,
)
from alkstore.store import _inspection, _inspection_async
from alkstore.worker import _maintenance, _maintenance_async
from tests.support import PATIENCE, wait_until

from ._checks import assert_utc
from ._runtimes import maintenance_of, worker_of

#: Texts meant to trip an engine or a page up: SQL, placeholders, markup, right-to-left controls,
#: a character beyond the BMP, new lines, and a target and an outcome as long as they may be.
HOSTILE_TARGETS = (
    "'; DROP TABLE action_log; --",
    "%(target)s %s {s} ?",
    "<script>alert(1)</script>",
    "invoice\u202efdp.exe",
    "\U0001f512 lock\nsecond line",
    "t" * 1000,
    "",
)


def test_an_action_is_logged_with_who_what_target_when_and_outcome(store: Store, clock: ManualClock) -> None:
    assert store.actions() == []
    first = store.log_action("pause", "emails", "Paused emails.", role="full", address="10.0.0.7")
    clock.advance(timedelta(seconds=5))
    second = store.log_action("requeue", "job 42", "refused: not dead", role="full", address="::1")
    assert second > first
    newest, oldest = store.actions()
    assert isinstance(newest, ActionInfo)
    assert (oldest.id, oldest.role, oldest.address, oldest.action, oldest.target, oldest.outcome) == (
        first,
        "full",
        "10.0.0.7",
        "pause",
        "emails",
        "Paused emails.",
    )
    assert (newest.id, newest.action, newest.address, newest.outcome) == (second, "requeue", "::1", "refused: not dead")
    assert newest.at == clock.now()
    assert oldest.at == clock.now() - timedelta(seconds=5)
    assert_utc(newest.at)


def test_hostile_texts_are_kept_as_given_and_pages_never_overlap(store: Store) -> None:
    ids = [store.log_action("purge", target, "o" * 2000, role="read", address="unknown") for target in HOSTILE_TARGETS]
    everything = store.actions(limit=1000)
    assert [entry.id for entry in everything] == sorted(ids, reverse=True)
    assert [entry.target for entry in everything] == list(reversed(HOSTILE_TARGETS))
    assert all(entry.outcome == "o" * 2000 for entry in everything)
    paged: list[ActionInfo] = []
    before = None
    while True:
        page = store.actions(limit=3, before=before)
        paged.extend(page)
        if len(page) < 3:
            break
        before = page[-1].id
    assert paged == everything
    assert store.actions(before=min(ids)) == []


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("role", "", InvalidName),
        ("role", "r" * 129, InvalidName),
        ("address", " padded", InvalidName),
        ("action", "bell\x07", InvalidName),
        ("action", 5, InvalidName),
        ("target", "t" * 1001, InvalidOptions),
        ("target", "nul\x00", InvalidOptions),
        ("target", b"bytes", InvalidArgument),
        ("outcome", "", InvalidOptions),
        ("outcome", "o" * 2001, InvalidOptions),
        ("outcome", "nul\x00", InvalidOptions),
    ],
)
def test_a_bad_entry_is_refused_and_nothing_is_written(store: Store, field: str, value: object, error: type) -> None:
    entry: dict[str, object] = {"action": "pause", "target": "q", "outcome": "paused", "role": "full", "address": "a"}
    entry[field] = value
    with pytest.raises(error):
        store.log_action(**entry)  # type: ignore[arg-type]
    assert store.actions() == []


@pytest.mark.parametrize(
    ("limit", "before", "error"),
    [
        (0, None, InvalidOptions),
        (1001, None, InvalidOptions),
        (True, None, InvalidArgument),
        (10, 0, InvalidOptions),
        (10, "5", InvalidArgument),
        (10, False, InvalidArgument),
        (10, 2**63, InvalidOptions),
    ],
)
def test_a_page_is_1_to_1000_entries_before_a_positive_id(
    store: Store, limit: object, before: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        store.actions(limit=limit, before=before)  # type: ignore[arg-type]


def purging(store: Store, retention: timedelta | None) -> _maintenance.Maintenance:
    """A worker's storage duty over ``store`` (in its runtime) keeping the action log ``retention``."""
    duty: _maintenance.Maintenance = maintenance_of(
        store, ("jobs",), dead_retention=None, label="w1", action_retention=retention
    )
    return duty


def logged(store: Store, what: str) -> int:
    return store.log_action("pause", what, "Paused.", role="full", address="10.0.0.7")


def test_the_upkeep_deletes_the_entries_older_than_the_action_retention(store: Store, clock: ManualClock) -> None:
    oldest = logged(store, "oldest")
    clock.advance(timedelta(days=30))
    younger = logged(store, "younger")
    clock.advance(timedelta(days=60))
    purging(store, timedelta(days=90)).prune()
    assert [entry.id for entry in store.actions()] == [younger, oldest], "90 days old, not older: kept"
    clock.advance(timedelta(microseconds=1))
    purging(store, timedelta(days=90)).prune()
    assert [entry.id for entry in store.actions()] == [younger]
    newest = logged(store, "newest")
    assert newest > younger > oldest, "a purged entry's id is never given again"
    clock.advance(timedelta(days=30))
    purging(store, DEFAULT_ACTION_RETENTION).prune()  # the default: 90 days
    assert [entry.id for entry in store.actions()] == [newest]


def test_an_action_retention_of_none_keeps_the_log_forever(store: Store, clock: ManualClock) -> None:
    entry = logged(store, "kept")
    clock.advance(timedelta(days=3650))
    purging(store, None).prune()
    assert [kept.id for kept in store.actions()] == [entry]


def test_one_pass_deletes_a_bounded_number_of_entries_oldest_first(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for runtime in (_maintenance, _maintenance_async):
        monkeypatch.setattr(runtime, "BATCH", 2)
        monkeypatch.setattr(runtime, "PRUNE_BATCHES", 2)
    ids = [logged(store, f"entry {n}") for n in range(5)]
    clock.advance(timedelta(days=1))
    fresh = logged(store, "fresh")
    purging(store, timedelta(hours=12)).prune()
    assert [entry.id for entry in store.actions()] == [fresh, ids[4]], "two batches of two, the lowest ids"
    purging(store, timedelta(hours=12)).prune()
    assert [entry.id for entry in store.actions()] == [fresh]


def test_the_port_purges_up_to_a_limit_of_the_entries_before_an_instant(store: Store, clock: ManualClock) -> None:
    ids = [logged(store, f"entry {n}") for n in range(3)]
    cut = clock.now() + timedelta(seconds=1)
    clock.advance(timedelta(seconds=1))
    later = logged(store, "at the cut")  # at == cut: not before it
    assert store.engine.purge_actions(cut, 2) == 2
    assert [entry.id for entry in store.actions()] == [later, ids[2]]
    assert store.engine.purge_actions(cut, 10) == 1
    assert store.engine.purge_actions(cut, 10) == 0
    assert [entry.id for entry in store.actions()] == [later]


def test_a_worker_prunes_the_action_log_past_its_retention(store: Store, clock: ManualClock) -> None:
    old = logged(store, "old")
    clock.advance(timedelta(days=2))
    recent = logged(store, "recent")
    stop = StopToken()
    worker = worker_of(store, handlers={"jobs": lambda payload, job: None}, action_retention=timedelta(days=1))
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: [entry.id for entry in store.actions()] == [recent], "the worker to prune the old entry")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
    assert not thread.is_alive(), "the worker did not stop"
    assert old not in [entry.id for entry in store.actions()]


def test_purge_actions_deletes_every_entry_older_than_it_is_told_in_batches(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for runtime in (_inspection, _inspection_async):
        monkeypatch.setattr(runtime, "BATCH", 2)  # five old entries: three batches, the last one short
    ids = [logged(store, f"entry {n}") for n in range(5)]
    clock.advance(timedelta(days=1))
    edge = logged(store, "a day old, not older")
    clock.advance(timedelta(days=1))
    fresh = logged(store, "fresh")
    assert store.purge_actions(timedelta(days=2)) == 0, "two days old, not older: kept"
    assert store.purge_actions(86400) == 5
    assert [entry.id for entry in store.actions()] == [fresh, edge]
    assert store.purge_actions(timedelta(days=1)) == 0
    assert ids[0] < ids[4] < edge < fresh


@pytest.mark.parametrize("bad", [-1, "1d", float("inf"), True, None])
def test_a_bad_purge_actions_age_is_refused_and_nothing_is_deleted(store: Store, bad: object) -> None:
    entry = logged(store, "kept")
    with pytest.raises(InvalidOptions, match="older_than"):
        store.purge_actions(bad)  # type: ignore[arg-type]
    assert [kept.id for kept in store.actions()] == [entry]


@pytest.mark.parametrize("bad", [-1, "90d", float("inf"), True])
def test_a_bad_action_retention_is_refused_before_the_worker_runs(store: Store, bad: object) -> None:
    with pytest.raises(InvalidOptions, match="action_retention"):
        worker_of(store, handlers={"jobs": lambda payload, job: None}, action_retention=bad)
