"""The scheduler's loops through a real outage (ADR 018): the leader reaches PostgreSQL through a proxy
that the test cuts and restores, while a manual clock measures the lease.

Every failing call is a real driver error (a dropped connection, a pool that cannot get one)
translated to ``DatabaseUnavailable``. A short outage is ridden out under the same lease; a
long one ends in standing by, and the standby loop leads again once the server is reachable
and the old lease has lapsed. Each boundary is fired exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import DatabaseUnavailable, ManualClock, Store
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL, RETRY_EVERY
from tests._outage import SECOND, STOOD_DOWN, Serving, rode_out, step, step_until, wait_for

from ._proxy import Proxy
from .conftest import T0, OpenStore, checked_out, engine_of, table

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _info_log(caplog: pytest.LogCaptureFixture) -> None:
    """Every test here reads what the loop logged at INFO."""
    caplog.set_level(logging.INFO, logger="alkstore")


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[Proxy]:
    with Proxy(pg_dsn) as running:
        yield running


@pytest.fixture
def leader_store(open_store: OpenStore, proxy: Proxy, clock: ManualClock, pg_schema: str) -> Iterator[Store]:
    """A store on a schema of its own that reaches the server only through the proxy, with a pool that
    gives up on a call within a second; after the test, its pool must settle with nothing checked out."""
    open_store(pg_schema, clock=clock).schedule("beat", "@every 2s", "jobs")
    store = open_store(
        pg_schema, url=proxy.url, clock=clock, min_size=1, max_size=2, pool_timeout=1.0, connect_timeout=2
    )
    yield store
    # A connection the pool is still re-opening after the outage counts as out for a while.
    wait_for(lambda: checked_out(engine_of(store)) == 0, "the pool to settle after the outage")


Lease = Callable[[], tuple[str, int, datetime]]


@pytest.fixture
def lease(db: psycopg.Connection[Any], pg_schema: str) -> Lease:
    """Reads the scheduler lease's owner, token and end from the test's own connection."""
    query = sql.SQL("SELECT owner, token, expires_at FROM {} WHERE name = %(name)s").format(table(pg_schema, "locks"))

    def read() -> tuple[str, int, datetime]:
        row = db.execute(query, {"name": SCHEDULER_LOCK}).fetchone()
        assert row is not None
        owner, token, expires_at = row
        return str(owner), int(token), expires_at

    return read


def reachable(store: Store) -> bool:
    try:
        store.engine.soonest_boundary()
    except DatabaseUnavailable:
        return False
    return True


def every_2s(*ns: int) -> list[datetime]:
    return [T0 + 2 * n * SECOND for n in ns]


def test_a_short_outage_is_ridden_out_under_the_same_lease(
    leader_store: Store, proxy: Proxy, clock: ManualClock, lease: Lease, caplog: pytest.LogCaptureFixture
) -> None:
    with Serving(leader_store.engine, clock) as leader:
        step(clock, 2)
        assert leader.boundaries == every_2s(1)
        before = lease()
        proxy.cut()
        step(clock, 4)  # T0 + 6 s: 4 s without the server, 2 boundaries due meanwhile
        assert leader.boundaries == every_2s(1)
        proxy.restore()
        wait_for(lambda: reachable(leader_store), "the pool to reconnect")
        step(clock)
        assert leader.boundaries == every_2s(1, 2, 3)
        assert lease()[:2] == before[:2]
    rode_out(leader, caplog.text)


def test_an_outage_longer_than_the_lease_ends_in_standing_by_and_the_loop_leads_again(
    leader_store: Store, proxy: Proxy, clock: ManualClock, lease: Lease, caplog: pytest.LogCaptureFixture
) -> None:
    with Serving(leader_store.engine, clock) as serving:
        step(clock, 2)
        _, first_token, expires_at = lease()
        renewed_at = clock.now()
        proxy.cut()
        lost_at = step_until(clock, lambda: STOOD_DOWN in caplog.text)
        assert lost_at == renewed_at + LEASE_TTL - RETRY_EVERY
        assert expires_at == renewed_at + LEASE_TTL
        wait_for(lambda: caplog.text.count("database unavailable") >= 2, "the standby loop to be refused twice")
        assert serving.boundaries == every_2s(1)
        proxy.restore()
        clock.set(expires_at)
        wait_for(
            lambda: clock.parked() >= 1 and lease()[1] != first_token,
            "the standby loop to lead again",
        )
        assert serving.boundaries == every_2s(1, 2, 3, 4, 5, 6)
        step(clock, 2)
        assert serving.boundaries == every_2s(1, 2, 3, 4, 5, 6, 7)
    assert serving.error is None
    assert proxy.refused > 0
    fired = [job.boundary for job in iter(lambda: leader_store.queue("jobs").claim("probe"), None)]
    assert sorted(boundary for boundary in fired if boundary is not None) == every_2s(1, 2, 3, 4, 5, 6, 7)
