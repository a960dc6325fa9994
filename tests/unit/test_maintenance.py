"""The vacuum rule (ADR 023): a table is due once its dead rows pass a floor plus a tenth of its live rows,
a low floor where the server's autovacuum does not cover it and a high one where it does; a worker looks
at them after a thousand runs or five seconds of runs, whichever comes first."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import alkstore
from alkstore import StopToken
from alkstore.engine import TableStats
from alkstore.store._kernel import kernel_of
from alkstore.worker import _maintenance, _upkeep
from alkstore.worker._upkeep import (
    BEHIND_DEAD_ROWS,
    HELD_BACK_PAUSE,
    VACUUM_CHECK_EVERY,
    VACUUM_CHURN_RUNS,
    VACUUM_DEAD_FRACTION,
    VACUUM_DEAD_ROWS,
    held_back,
    look_due,
    retry_held_back,
    vacuum_due,
)
from tests.support import PATIENCE, wait_until


def stats(dead: int, live: int = 0, *, autovacuum: bool = False) -> TableStats:
    return TableStats("jobs", live, dead, autovacuum, vacuumable=True)


@pytest.mark.parametrize(("autovacuum", "floor"), [(False, VACUUM_DEAD_ROWS), (True, BEHIND_DEAD_ROWS)])
def test_a_table_is_due_once_its_dead_rows_reach_the_floor_plus_a_fraction_of_its_live_ones(
    autovacuum: bool, floor: int
) -> None:
    assert vacuum_due([stats(floor - 1, autovacuum=autovacuum)]) == []
    assert vacuum_due([stats(floor, autovacuum=autovacuum)]) == [stats(floor, autovacuum=autovacuum)]
    deep = 1_000_000
    bar = floor + int(VACUUM_DEAD_FRACTION * deep)
    assert vacuum_due([stats(bar - 1, deep, autovacuum=autovacuum)]) == []
    assert vacuum_due([stats(bar, deep, autovacuum=autovacuum)]) == [stats(bar, deep, autovacuum=autovacuum)]


def test_a_worker_waits_for_autovacuum_to_fall_far_behind_before_it_steps_in() -> None:
    assert VACUUM_DEAD_ROWS < BEHIND_DEAD_ROWS
    assert vacuum_due([stats(VACUUM_DEAD_ROWS, autovacuum=True)]) == []


def test_only_the_due_tables_are_named_in_their_order() -> None:
    quiet = TableStats("dead_jobs", 10, 3, False, True)
    busy = TableStats("jobs", 1000, 50_000, False, True)
    assert vacuum_due([quiet, busy]) == [busy]
    assert vacuum_due([]) == []


@pytest.mark.parametrize(
    ("runs", "seconds", "due"),
    [
        (0, 0.0, False),
        (0, 3600.0, False),  # an idle worker looks only at its prunes
        (1, VACUUM_CHECK_EVERY - 0.1, False),
        (1, VACUUM_CHECK_EVERY, True),
        (VACUUM_CHURN_RUNS - 1, 0.0, False),
        (VACUUM_CHURN_RUNS, 0.0, True),  # a fast worker looks without waiting for the clock
    ],
)
def test_a_worker_looks_at_its_dead_rows_after_some_runs_or_some_seconds_of_them(
    runs: int, seconds: float, due: bool
) -> None:
    assert look_due(runs, seconds) is due


def test_the_runs_a_worker_ends_leave_about_the_dead_rows_that_make_a_table_due() -> None:
    # Two dead rows a run (the claimed version, the acked row): the count reaches the floor.
    assert 2 * VACUUM_CHURN_RUNS >= VACUUM_DEAD_ROWS


def test_a_worker_that_ends_many_runs_looks_at_its_dead_rows_without_waiting_for_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The clock's rule is put out of reach: only the count of runs can make the duty look.
    monkeypatch.setattr(_upkeep, "VACUUM_CHECK_EVERY", 3600.0)
    monkeypatch.setattr(_maintenance, "VACUUM_CHECK_EVERY", 0.5)  # how long an idle duty sleeps
    store = alkstore.open("memory://")
    kernel = kernel_of(store)
    engine = store.engine
    table_stats = engine.table_stats
    looks = [0]

    def counted() -> list[TableStats]:
        looks[0] += 1
        return table_stats()

    monkeypatch.setattr(engine, "table_stats", counted)
    runs = [0]
    duty = _maintenance.Maintenance(kernel, ["q"], dead_retention=None, label="t", churn=lambda: runs[0])
    stop = StopToken()
    thread = threading.Thread(target=duty.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: looks[0] == 1, "the first look, with the first prune")
        runs[0] = VACUUM_CHURN_RUNS - 1
        time.sleep(2.0)  # several polls see the runs: too few to look
        assert looks[0] == 1
        runs[0] = VACUUM_CHURN_RUNS
        wait_until(lambda: looks[0] == 2, "a look after a thousand runs")
        runs[0] = 2 * VACUUM_CHURN_RUNS
        wait_until(lambda: looks[0] == 3, "a look after a thousand more")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
        store.close()
    assert not thread.is_alive()


@pytest.mark.parametrize(
    ("held_at", "horizon", "waited", "retried"),
    [
        ("812", "812", HELD_BACK_PAUSE - 1, False),
        ("812", "812", HELD_BACK_PAUSE, False),  # the same transaction holds the rows: a vacuum finds them again
        ("812", "812", 100 * HELD_BACK_PAUSE, False),  # however long it stays open
        ("812", "977", HELD_BACK_PAUSE - 1, False),  # it ended, but no sooner than the pause
        ("812", "977", HELD_BACK_PAUSE, True),
        ("812", None, HELD_BACK_PAUSE, True),  # nothing holds any rows now
        (None, None, HELD_BACK_PAUSE - 1, False),  # an engine that cannot tell: the pause alone
        (None, None, HELD_BACK_PAUSE, True),
    ],
)
def test_a_held_back_table_is_vacuumed_again_after_the_pause_once_its_horizon_has_moved(
    held_at: str | None, horizon: str | None, waited: float, retried: bool
) -> None:
    held = TableStats("jobs", 0, 90_000, False, True, held_at)
    now = TableStats("jobs", 0, 120_000, False, True, horizon)
    assert retry_held_back(held, now, waited) is retried


class _HeldEngine:
    """In place of the memory engine's upkeep: a storage whose vacuums reclaim nothing while ``horizon``
    is ``"812"``; with ``churn``, each vacuum moves the horizon on and leaves as many rows dead (a busy
    worker's, dead during the vacuum)."""

    def __init__(self, *, churn: bool = False) -> None:
        self.horizon: str | None = "812"
        self.churn = churn
        self.vacuums = 0

    def table_stats(self) -> list[TableStats]:
        dead = 50_000 if self.churn or self.horizon == "812" else 0
        return [TableStats("jobs", 0, dead + 10_000 * self.vacuums, False, True, self.horizon)]

    def vacuum(self, tables: list[str]) -> list[str]:
        self.vacuums += 1
        if self.churn:
            self.horizon = f"{900 + self.vacuums}"
        return list(tables)


def test_the_duty_does_not_vacuum_a_held_back_table_again_until_its_horizon_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_upkeep, "HELD_BACK_PAUSE", 0.0)  # the pause alone would let every look vacuum
    engine = _HeldEngine()
    store = alkstore.open("memory://")
    monkeypatch.setattr(store.engine, "table_stats", engine.table_stats)
    monkeypatch.setattr(store.engine, "vacuum", engine.vacuum)
    duty = _maintenance.Maintenance(kernel_of(store), ["q"], dead_retention=None, label="t")
    try:
        assert duty.vacuum() == ["jobs"]
        assert [duty.vacuum() for _ in range(5)] == [[]] * 5, "the same transaction still holds the rows"
        assert engine.vacuums == 1
        engine.horizon = "977"  # it ended
        assert duty.vacuum() == ["jobs"]
        assert engine.vacuums == 2
    finally:
        store.close()


@pytest.mark.parametrize(
    ("before", "after", "dead_after", "held"),
    [
        ("812", "812", 90_000, True),  # the same transaction kept the rows through the vacuum
        ("812", "977", 90_000, False),  # the horizon moved meanwhile: the rows died during the vacuum
        ("812", None, 90_000, False),
        (None, None, 90_000, True),  # an engine that cannot tell: held back, as the counts say
        ("812", "812", 0, False),  # the vacuum reclaimed them
    ],
)
def test_a_vacuum_is_held_back_when_the_table_stays_due_under_the_same_horizon(
    before: str | None, after: str | None, dead_after: int, held: bool
) -> None:
    was = TableStats("jobs", 0, 90_000, False, True, before)
    assert held_back(was, TableStats("jobs", 0, dead_after, False, True, after)) is held


def test_the_duty_vacuums_again_at_its_next_look_when_the_rows_still_counted_died_during_its_vacuum(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _HeldEngine(churn=True)
    store = alkstore.open("memory://")
    monkeypatch.setattr(store.engine, "table_stats", engine.table_stats)
    monkeypatch.setattr(store.engine, "vacuum", engine.vacuum)
    duty = _maintenance.Maintenance(kernel_of(store), ["q"], dead_retention=None, label="t")
    try:
        with caplog.at_level(logging.WARNING, logger="alkstore.worker"):
            assert [duty.vacuum() for _ in range(3)] == [["jobs"]] * 3, "no pause: nothing held the rows"
        assert engine.vacuums == 3
        assert caplog.records == [], "no open transaction to warn of"
    finally:
        store.close()
