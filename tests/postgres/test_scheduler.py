"""The scheduler on PostgreSQL: row-locked ticks, the leadership row, atomic fires, exact storage.

Each test uses a schema of its own (a tick fires every due schedule in its schema). Time is
a ``ManualClock``; threads are waited for with generous wall-clock timeouts, boundaries never.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import DatabaseError, Fire, LeadershipLost, ManualClock, ScheduleOpts, StopToken, Store
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL, RENEW_EVERY

from .conftest import PATIENCE, T0, OpenStore, table, wait_until

pytestmark = pytest.mark.postgres


def fired_jobs(db: psycopg.Connection[Any], schema: str) -> list[tuple[str, Any]]:
    query = sql.SQL("SELECT schedule, boundary FROM {} WHERE schedule IS NOT NULL ORDER BY id")
    return [(name, boundary) for name, boundary in db.execute(query.format(table(schema, "jobs")))]


def blocked_tickers(db: psycopg.Connection[Any], schema: str) -> int:
    """Sessions of this schema's tickers waiting for a row lock on its schedules."""
    row = db.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        " AND query LIKE '%%FOR UPDATE%%' AND strpos(query, %s) > 0",
        [sql.Identifier(schema).as_string(db) + ".schedules"],
    ).fetchone()
    assert row is not None
    return int(row[0])


class Ticker(threading.Thread):
    """A thread calling ``store.tick()`` once, with no leadership."""

    def __init__(self, store: Store, start: threading.Barrier | None = None) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.start_together = start
        self.fires: list[Fire] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.start_together is not None:
                self.start_together.wait(PATIENCE)
            self.fires = self.store.tick()
        except BaseException as exc:
            self.error = exc

    def result(self) -> list[Fire]:
        self.join(PATIENCE)
        assert not self.is_alive(), "the tick never finished"
        if self.error is not None:
            raise self.error
        assert self.fires is not None
        return self.fires


@pytest.fixture
def two_hosts(open_store: OpenStore, pg_schema: str, clock: ManualClock) -> tuple[Store, Store]:
    """Two stores on one schema, as two hosts sharing a database are."""
    return open_store(pg_schema, clock=clock), open_store(pg_schema, clock=clock)


def on_ticks(store: Store, **every: str) -> None:
    """Schedule each name ``@every`` its interval on the queue ``ticks``."""
    for name, interval in every.items():
        store.schedule(name, f"@every {interval}", "ticks")


def test_a_rogue_ticker_blocked_behind_the_first_fires_nothing_twice(
    two_hosts: tuple[Store, Store], pg_schema: str, clock: ManualClock, db: psycopg.Connection[Any]
) -> None:
    first, rogue = two_hosts
    on_ticks(first, alpha="10s", beta="15s")
    clock.advance(35)
    expected = {("alpha", T0 + timedelta(seconds=s)) for s in (10, 20, 30)}
    expected |= {("beta", T0 + timedelta(seconds=s)) for s in (15, 30)}

    # Hold the schedule rows so both tickers queue up on them, then let them race.
    with psycopg.connect(db.info.dsn) as holder:
        holder.execute(sql.SQL("SELECT name FROM {} FOR UPDATE").format(table(pg_schema, "schedules"))).fetchall()
        tickers = [Ticker(first), Ticker(rogue)]
        for ticker in tickers:
            ticker.start()
        wait_until(lambda: blocked_tickers(db, pg_schema) == 2, "both tickers to block on the schedule rows")
        holder.commit()
    results = [ticker.result() for ticker in tickers]

    assert sorted(len(fires) for fires in results) == [0, len(expected)]
    fired = [(fire.schedule, fire.boundary) for fires in results for fire in fires]
    assert sorted(fired) == sorted(expected)
    assert sorted(fired_jobs(db, pg_schema)) == sorted(expected)


def test_two_tickers_racing_over_a_band_of_boundaries_fire_each_exactly_once(
    two_hosts: tuple[Store, Store], pg_schema: str, clock: ManualClock, db: psycopg.Connection[Any]
) -> None:
    one, other = two_hosts
    on_ticks(one, pulse="1s", beat="2s")
    fired: list[tuple[str, Any]] = []
    for _ in range(15):
        clock.advance(3)
        start = threading.Barrier(2)
        tickers = [Ticker(one, start), Ticker(other, start)]
        for ticker in tickers:
            ticker.start()
        fired += [(fire.schedule, fire.boundary) for ticker in tickers for fire in ticker.result()]
    horizon = 45
    expected = [("pulse", T0 + timedelta(seconds=s)) for s in range(1, horizon + 1)]
    expected += [("beat", T0 + timedelta(seconds=s)) for s in range(2, horizon + 1, 2)]
    assert Counter(fired) == Counter(expected)
    assert Counter(fired_jobs(db, pg_schema)) == Counter(expected)


def test_the_live_leadership_row_carries_this_runners_owner_token_and_goes_at_a_clean_stop(
    open_store: OpenStore, pg_schema: str, clock: ManualClock, db: psycopg.Connection[Any]
) -> None:
    store = open_store(pg_schema, clock=clock)
    lock_row = sql.SQL("SELECT owner, token, expires_at FROM {} WHERE name = %s").format(table(pg_schema, "locks"))
    stop = StopToken()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            store.run_schedules(stop)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        row = db.execute(lock_row, [SCHEDULER_LOCK]).fetchone()
        assert row is not None
        owner, token, expires_at = row
        assert re.fullmatch(rf".+:{os.getpid()}:\d+:[0-9a-f]{{8}}", owner), owner
        assert expires_at == T0 + LEASE_TTL

        with pytest.raises(LeadershipLost):
            open_store(pg_schema, clock=clock).run_schedules(StopToken())
        assert db.execute(lock_row, [SCHEDULER_LOCK]).fetchone() == (owner, token, expires_at)

        now = clock.advance(RENEW_EVERY)
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        assert db.execute(lock_row, [SCHEDULER_LOCK]).fetchone() == (owner, token, now + LEASE_TTL)
    finally:
        stop.cancel()
        runner.join(PATIENCE)
    assert not runner.is_alive()
    assert errors == []
    assert db.execute(lock_row, [SCHEDULER_LOCK]).fetchone() is None


def test_a_tick_that_fails_midway_fires_nothing_and_advances_nothing(
    open_store: OpenStore, pg_schema: str, clock: ManualClock, db: psycopg.Connection[Any]
) -> None:
    store = open_store(pg_schema, clock=clock)
    store.schedule("fragile", "@every 10s", "ticks")
    clock.advance(25)
    before = store.schedules()
    schema = sql.Identifier(pg_schema)
    db.execute(
        sql.SQL(
            "CREATE FUNCTION {}.refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'no fires today'; END $$"
        ).format(schema)
    )
    db.execute(
        sql.SQL("CREATE TRIGGER refuse BEFORE INSERT ON {} FOR EACH ROW EXECUTE FUNCTION {}.refuse()").format(
            table(pg_schema, "jobs"), schema
        )
    )
    with pytest.raises(DatabaseError, match="no fires today") as raised:
        store.tick()
    assert isinstance(raised.value.__cause__, psycopg.errors.RaiseException)
    assert store.schedules() == before
    assert fired_jobs(db, pg_schema) == []

    db.execute(sql.SQL("DROP TRIGGER refuse ON {}").format(table(pg_schema, "jobs")))
    fires = store.tick()
    assert [fire.boundary for fire in fires] == [T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]


def test_concurrent_first_registrations_of_one_name_agree_on_its_boundary(
    open_store: OpenStore, pg_schema: str, db: psycopg.Connection[Any]
) -> None:
    early, late = ManualClock(T0), ManualClock(T0 + timedelta(seconds=3))
    stores = [open_store(pg_schema, clock=early), open_store(pg_schema, clock=late)]
    for round_ in range(10):
        name = f"race-{round_}"
        start = threading.Barrier(2)
        results: list[Any] = []

        def register(
            store: Store, start: threading.Barrier = start, name: str = name, results: list[Any] = results
        ) -> None:
            start.wait(PATIENCE)
            results.append(store.schedule(name, "@every 1m", "ticks"))

        threads = [threading.Thread(target=register, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE)
        assert len(results) == 2
        stored = {schedule.name: schedule for schedule in stores[0].schedules()}[name]
        assert results[0].next_boundary == results[1].next_boundary == stored.next_boundary


def test_schedule_options_and_order_are_stored_exactly(
    open_store: OpenStore, pg_schema: str, clock: ManualClock, db: psycopg.Connection[Any]
) -> None:
    store = open_store(pg_schema, clock=clock)
    opts = ScheduleOpts(priority=-3, max_attempts=9, expires=timedelta(days=2, seconds=1, microseconds=7))
    names = ["b", "B", "a", "é", "Z", "_", "ä", "a b"]
    for name in names:
        store.schedule(name, "@every 7s", "ticks", {"name": name}, opts)
    listed = store.schedules()
    assert [schedule.name for schedule in listed] == sorted(names)
    assert {schedule.opts for schedule in listed} == {opts}
    row = db.execute(sql.SQL("SELECT DISTINCT expires_us FROM {}").format(table(pg_schema, "schedules"))).fetchall()
    assert row == [(opts.expires // timedelta(microseconds=1),)]  # type: ignore[operator]
    assert store.engine.soonest_boundary() == T0 + timedelta(seconds=7)
