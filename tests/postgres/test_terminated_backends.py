"""A store whose pooled backends were all terminated (a server restart, an operator's kill) carries on at once.

psycopg_pool's own check pauses 1 s, then 2 s, then 4 s between the dead connections it finds,
so the first call after a restart stalled for seconds: past a short lease, a job ran and its
ack came too late, and the job ran again (ADR 050). The store checks its connections itself,
replacing each dead one without a pause.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg

from alkstore import SystemClock

from .conftest import PATIENCE, OpenStore, engine_of, wait_until

#: The pool's pauses for three dead connections add up to about 3 s; a fresh connection takes milliseconds.
BOUND = 2.0


def backends(db: psycopg.Connection[Any], name: str) -> int:
    row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]).fetchone()
    assert row is not None
    return int(row[0])


def test_the_first_call_after_every_pooled_backend_was_terminated_does_not_pause(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any]
) -> None:
    name = f"alkstore-terminated-{uuid.uuid4().hex[:8]}"
    url = f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}application_name={name}"
    store = open_store(url=url, min_size=3, max_size=3, clock=SystemClock())
    engine = engine_of(store)
    store.queue("jobs").enqueue({"n": 0})
    wait_until(lambda: engine.pool.get_stats()["pool_available"] == 3, "the pool to fill", timeout=PATIENCE)
    db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", [name])
    wait_until(lambda: backends(db, name) == 0, "the backends to end", timeout=PATIENCE)
    started = time.monotonic()
    store.queue("jobs").enqueue({"n": 1})
    took = time.monotonic() - started
    assert took < BOUND, f"the first call after the backends ended took {took:.1f} s"
    job = store.queue("jobs").claim("w")
    assert job is not None
    assert job.payload == {"n": 0}
    job.ack()
