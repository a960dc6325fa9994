"""Queue configuration lives in the database (ADR 016): one row of ``queues``, read by every engine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import ManualClock, QueueDefaults
from alkstore.store._kernel import CONFIG_TTL

from .conftest import OpenStore, table

pytestmark = pytest.mark.postgres

SECOND = timedelta(seconds=1)


def stored(db: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT name, visibility_us, max_attempts, backoff_base_us, backoff_cap_us, priority FROM {}")
    return db.execute(query.format(table(schema, "queues")), {}).fetchall()


def test_a_configuration_is_one_row_that_a_store_on_another_connection_pool_reads(
    open_store: OpenStore, pg_module_schema: str, db: psycopg.Connection[Any], clock: ManualClock
) -> None:
    first, second = open_store(clock=clock), open_store(clock=clock)
    assert first.engine is not second.engine
    assert second.queue("billing").defaults().max_attempts == 3  # cached by the second store
    first.queue("billing").configure(visibility_timeout=45, max_attempts=6, priority=2)
    assert stored(db, pg_module_schema) == [("billing", 45_000_000, 6, None, None, 2)]
    clock.advance(CONFIG_TTL)
    assert second.queue("billing").defaults() == QueueDefaults(45 * SECOND, 6, 5 * SECOND, timedelta(hours=1), 2)
    job = second.get_job(second.queue("billing").enqueue("invoice"))
    assert job is not None
    assert (job.max_attempts, job.priority) == (6, 2)
    first.queue("billing").configure()
    assert stored(db, pg_module_schema) == []
