"""How many connections a store holds: never more than ``max_size + listen_max_size`` (ADR 019).

The server counts them (``pg_stat_activity``, by the store's ``application_name``) while
threads enqueue, claim and ack, and more claims park than the listening pool may hold.
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from psycopg.rows import scalar_row, tuple_row

import alkstore
from alkstore import ManualClock
from tests._claimer import Claimer
from tests.support import must_claim

from .conftest import OpenStore, engine_of, wait_until

pytestmark = pytest.mark.postgres

COUNT = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"


def with_app_name(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


class Sampler(threading.Thread):
    """Counts the server's connections of one application name, on its own connection, until stopped."""

    def __init__(self, dsn: str, app: str) -> None:
        super().__init__(daemon=True)
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._app = app
        self._halt = threading.Event()
        self.peak = 0
        self.last = 0

    def run(self) -> None:
        with self._conn:
            while not self._halt.is_set():
                row = self._conn.execute(COUNT, [self._app]).fetchone()
                assert row is not None
                self.last = int(row[0])
                self.peak = max(self.peak, self.last)
                self._halt.wait(0.002)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def test_a_store_holds_at_most_max_size_plus_listen_max_size_connections(
    open_store: OpenStore, pg_dsn: str, clock: ManualClock
) -> None:
    app = f"alkstore-bound-{uuid.uuid4().hex[:8]}"
    store = open_store(url=with_app_name(pg_dsn, app), clock=clock, max_size=2, listen_max_size=2)
    engine = engine_of(store)
    assert engine.max_connections == 4
    sampler = Sampler(pg_dsn, app)
    sampler.start()
    try:
        parked_queue = f"parked-{uuid.uuid4().hex[:8]}"
        parked = [Claimer(store, parked_queue, poll_interval=0.2) for _ in range(4)]  # two more than may listen
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            queue = store.queue(f"busy-{worker}-{uuid.uuid4().hex[:8]}")
            try:
                for n in range(50):
                    queue.enqueue(n)
                    job = must_claim(queue, f"w{worker}")
                    job.ack()
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        for n in range(len(parked)):
            store.queue(parked_queue).enqueue(n)
        for claimer in parked:
            job = claimer.returned()
            assert job is not None
            job.ack()
        wait_until(lambda: sampler.last >= engine.max_connections, "both pools to be full")  # the bound is reached
    finally:
        sampler.stop()
    assert sampler.peak <= engine.max_connections


def test_the_connection_bound_is_the_sum_of_the_two_pools(open_store: OpenStore, clock: ManualClock) -> None:
    assert engine_of(open_store(clock=clock, max_size=3)).max_connections == 6  # listen_max_size: max_size
    assert engine_of(open_store(clock=clock, max_size=3, listen_max_size=1)).max_connections == 4


def test_two_statements_sent_together_commit_together_or_not_at_all(
    open_store: OpenStore, clock: ManualClock, pg_dsn: str
) -> None:
    # The pipelined ack and claim (ADR 073) are one transaction: a failing second statement takes the first back.
    store = open_store(clock=clock)
    connections = engine_of(store)._connections
    table = f"two_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE TABLE "{table}" (n integer)')
        try:
            insert, count = f'INSERT INTO "{table}" VALUES (%(n)s) RETURNING n', f'SELECT count(*) FROM "{table}"'
            assert connections.two(insert, {"n": 1}, scalar_row, count, {}, tuple_row) == ([1], [(1,)])
            with pytest.raises(alkstore.DatabaseError):
                connections.two(insert, {"n": 2}, scalar_row, "SELECT 1 / %(zero)s", {"zero": 0}, tuple_row)
            assert admin.execute(f'SELECT array_agg(n) FROM "{table}"').fetchone() == ([1],)
            assert store.queue("q").claim("w") is None
        finally:
            admin.execute(f'DROP TABLE "{table}"')
