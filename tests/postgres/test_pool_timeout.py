"""A leader sharing the pool with busy threads (ADR 036): it waits for a connection less than its lease.

The pool is exhausted by connections the test holds, as a process's own busy worker threads
would hold them; the leader must give up (and stand by) while its lease still holds, and never
renew a lease that lapsed while it waited.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import alkstore
from alkstore import DatabaseUnavailable, InvalidOptions, LeadershipLost, StopToken, SystemClock
from alkstore.adapters.postgres import PostgresEngine
from alkstore.adapters.postgres._connections import PooledConnection
from alkstore.adapters.postgres._options import DEFAULT_POOL_TIMEOUT, parse_options
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL
from alkstore.scheduler._runner import run_schedules

from .conftest import PATIENCE, OpenStore, engine_of, wait_until

pytestmark = pytest.mark.postgres

POOL = 2


def hold_every_connection(engine: PostgresEngine) -> list[PooledConnection]:
    """Check out every connection of the main pool, as busy threads of the same process would."""
    return [engine.pool.getconn() for _ in range(POOL)]


def give_back(engine: PostgresEngine, held: list[PooledConnection]) -> None:
    for conn in held:
        engine.pool.putconn(conn)


def test_the_default_pool_timeout_is_under_the_scheduler_lease() -> None:
    assert parse_options("postgresql://localhost/test", {}).pool_timeout == DEFAULT_POOL_TIMEOUT
    assert LEASE_TTL.total_seconds() > DEFAULT_POOL_TIMEOUT


@pytest.mark.parametrize("seconds", [LEASE_TTL.total_seconds(), 30])
def test_a_pool_timeout_as_long_as_the_scheduler_lease_is_refused_before_connecting(seconds: float) -> None:
    with pytest.raises(InvalidOptions, match="pool_timeout must be under the scheduler's 10 s lease"):
        parse_options("postgresql://localhost/test", {"pool_timeout": seconds})


def test_a_lock_renewal_starved_of_connections_fails_before_the_lease_lapses_and_never_renews_it_late(
    open_store: OpenStore,
) -> None:
    store = open_store(min_size=1, max_size=POOL, clock=SystemClock())
    engine = engine_of(store)
    now = datetime.now(UTC)
    lock = engine.try_lock("starved", "owner", now, now + timedelta(seconds=2))
    assert lock is not None
    held = hold_every_connection(engine)
    # The connections come back after the lease lapsed: a renewal still waiting then would renew it late.
    timer = threading.Timer(3.0, give_back, (engine, held))
    timer.start()
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            engine.renew_lock(lock, now, datetime.now(UTC) + timedelta(seconds=10))
        waited = time.monotonic() - started
    finally:
        timer.join()
    assert waited < 2.0, f"the renewal waited {waited:.1f} s for a connection, past the 2 s lease"
    assert engine.read_lock("starved") == lock


def test_an_async_lock_renewal_starved_of_connections_fails_before_the_lease_lapses(
    pg_dsn: str, pg_module_schema: str
) -> None:
    async def body() -> None:
        store = await alkstore.open_async(
            pg_dsn, schema=pg_module_schema, migrate=True, min_size=1, max_size=POOL, clock=SystemClock()
        )
        try:
            engine = store.engine
            now = datetime.now(UTC)
            lock = await engine.try_lock("starved async", "owner", now, now + timedelta(seconds=2))
            assert lock is not None
            held = [await engine.pool.getconn() for _ in range(POOL)]  # type: ignore[attr-defined]

            async def give_back_later() -> None:
                await asyncio.sleep(3.0)  # after the lease lapsed
                for conn in held:
                    await engine.pool.putconn(conn)  # type: ignore[attr-defined]

            returning = asyncio.create_task(give_back_later())
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable):
                await engine.renew_lock(lock, now, datetime.now(UTC) + timedelta(seconds=10))
            waited = time.monotonic() - started
            await returning
            assert waited < 2.0, f"the renewal waited {waited:.1f} s for a connection, past the 2 s lease"
            assert await engine.read_lock("starved async") == lock
        finally:
            await store.close()

    asyncio.run(body())


def test_a_leader_starved_of_connections_by_its_own_threads_stands_down_before_its_lease_lapses(
    open_store: OpenStore,
) -> None:
    store = open_store(min_size=1, max_size=POOL, clock=SystemClock())  # the default pool_timeout
    engine = engine_of(store)
    stop = StopToken()
    ended: list[tuple[BaseException, datetime]] = []

    def lead() -> None:
        try:
            run_schedules(engine, store.clock, stop)
        except BaseException as exc:
            ended.append((exc, datetime.now(UTC)))

    leader = threading.Thread(target=lead, name="leader", daemon=True)
    leader.start()
    held: list[PooledConnection] = []
    try:
        wait_until(lambda: store.leader() is not None, "the loop leads")
        held = hold_every_connection(engine)
        leader.join(LEASE_TTL.total_seconds() + PATIENCE)
    finally:
        give_back(engine, held)
        stop.cancel()
        leader.join(PATIENCE)
    assert not leader.is_alive()
    [(error, at)] = ended
    assert isinstance(error, LeadershipLost)
    assert isinstance(error.__cause__, DatabaseUnavailable)
    last = engine.read_lock(SCHEDULER_LOCK)
    assert last is not None
    assert at < last.expires_at, f"the leader stood down at {at}, after its lease lapsed at {last.expires_at}"
