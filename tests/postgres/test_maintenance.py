"""The vacuum duty on PostgreSQL (ADR 023): the storage's counts, VACUUM outside a transaction, skips."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest

from alkstore import Store
from alkstore.engine import TableStats
from alkstore.store._kernel import kernel_of
from alkstore.worker import _upkeep
from alkstore.worker._maintenance import Maintenance
from tests.support import wait_until

from .conftest import table

pytestmark = pytest.mark.postgres

DEAD = 300


def jobs_stats(store: Store) -> TableStats:
    (jobs,) = [stats for stats in store.engine.table_stats() if stats.table == "jobs"]
    return jobs


def leave_dead_rows(store: Store, count: int = DEAD) -> None:
    """Enqueue ``count`` jobs and cancel them (a dead row each), and wait until the server counts them."""
    ids = store.queue("jobs").enqueue_many(["doomed"] * count)
    assert store.engine.cancel(ids) == ids
    wait_until(lambda: jobs_stats(store).dead_rows >= count, "the server to count the dead rows")


@pytest.fixture
def low_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_upkeep, "VACUUM_DEAD_ROWS", DEAD // 2)
    monkeypatch.setattr(_upkeep, "BEHIND_DEAD_ROWS", DEAD // 2)  # a server whose autovacuum runs


def test_the_storage_reports_every_table_of_the_schema_with_what_its_autovacuum_does(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    stats = store.engine.table_stats()
    assert [each.table for each in stats] == sorted(each.table for each in stats)
    tables = db.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname <> 'schema_version'",
        [pg_module_schema],
    ).fetchall()
    assert {each.table for each in stats} == {name for (name,) in tables}, "every data table is looked after"
    row = db.execute("SELECT current_setting('autovacuum') = 'on'").fetchone()
    assert row is not None
    assert {each.autovacuum for each in stats} == {row[0]}
    assert all(each.vacuumable for each in stats), "the owner may vacuum its tables"


def test_the_duty_vacuums_a_table_whose_dead_rows_crossed_the_threshold(
    store: Store, low_threshold: None, caplog: pytest.LogCaptureFixture
) -> None:
    duty = Maintenance(kernel_of(store), ["jobs"], dead_retention=None, label="w1")
    assert duty.vacuum() == []
    leave_dead_rows(store)
    with caplog.at_level(logging.INFO, logger="alkstore.worker"):
        assert duty.vacuum() == ["jobs"]
    assert "worker w1 vacuumed table jobs" in caplog.text
    # Another test's transaction open at that instant may have kept the rows (the server is shared).
    wait_until(
        lambda: jobs_stats(store).dead_rows < DEAD // 2 or not store.engine.vacuum(["jobs"]),
        "a vacuum to reclaim the dead rows",
    )
    assert duty.vacuum() == []


def test_a_table_an_open_transaction_keeps_dead_rows_in_is_left_alone_for_a_while(
    store: Store, low_threshold: None, pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    duty = Maintenance(kernel_of(store), ["jobs"], dead_retention=None, label="w1")
    with psycopg.connect(pg_dsn) as holder:
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")  # its snapshot is older than the rows about to die
        leave_dead_rows(store)
        with caplog.at_level(logging.WARNING, logger="alkstore.worker"):
            assert duty.vacuum() == ["jobs"]
            assert duty.vacuum() == [], "vacuuming again would find the same rows"
    (warning,) = [record.getMessage() for record in caplog.records if record.name == "alkstore.worker"]
    assert "table jobs still holds" in warning
    assert "an open transaction" in warning
    assert "the oldest backend_xmin or backend_xid is " in warning, "the horizon, to find the transaction by"


def test_the_storage_names_the_horizon_an_open_transaction_holds_and_the_duty_vacuums_again_once_it_ends(
    store: Store, low_threshold: None, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_upkeep, "HELD_BACK_PAUSE", 0.0)  # only the horizon keeps the table alone
    duty = Maintenance(kernel_of(store), ["jobs"], dead_retention=None, label="w1")
    with psycopg.connect(pg_dsn) as holder:
        row = holder.execute("SELECT txid_current()::text").fetchone()  # a transaction id, older than the rows
        assert row is not None
        leave_dead_rows(store)
        held = jobs_stats(store).horizon
        assert held is not None
        # The horizon named is this transaction's, or an older one's (the server is shared).
        older = holder.execute("SELECT age(%s::text::xid) >= age(%s::text::xid)", [held, row[0]]).fetchone()
        assert older == (True,)
        assert duty.vacuum() == ["jobs"]
        if jobs_stats(store).horizon == held:
            assert duty.vacuum() == [], "the same transaction holds the rows: no vacuum until it ends"
    # Another test's transaction open at that instant may hold them a little longer.
    wait_until(lambda: duty.vacuum() == ["jobs"], "a vacuum once the transaction ended")


def test_a_table_another_vacuum_holds_is_skipped_not_waited_for(
    store: Store, pg_module_schema: str, pg_dsn: str
) -> None:
    with psycopg.connect(pg_dsn) as holder:  # a transaction holding the lock a VACUUM takes
        holder.execute(
            psycopg.sql.SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(table(pg_module_schema, "jobs"))
        )
        assert store.engine.vacuum(["jobs", "dead_jobs"]) == ["dead_jobs"]
    assert store.engine.vacuum(["jobs"]) == ["jobs"]


def test_the_vacuum_reclaims_dead_rows_without_cutting_the_table_s_empty_tail(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    """The truncation a plain VACUUM tries takes an ACCESS EXCLUSIVE lock every claim would queue behind."""

    def pages() -> int:
        row = db.execute("SELECT pg_relation_size(%s)", [f"{pg_module_schema}.jobs"]).fetchone()
        assert row is not None
        return int(row[0])

    leave_dead_rows(store, 20 * DEAD)  # the table's last pages hold only these rows
    before = pages()

    def reclaimed() -> bool:
        """Vacuumed again until the rows go: another session's snapshot may keep them a while (a shared server)."""
        store.engine.vacuum(["jobs"])
        return jobs_stats(store).dead_rows < DEAD

    wait_until(reclaimed, "a vacuum to reclaim the dead rows")
    assert pages() == before, "the emptied tail stays the table's"


def test_the_migration_gives_the_jobs_table_its_own_autovacuum_trigger(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    row = db.execute(
        "SELECT c.reloptions FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = 'jobs'",
        [pg_module_schema],
    ).fetchone()
    assert row is not None
    assert sorted(row[0]) == [
        "autovacuum_vacuum_cost_delay=0",
        "autovacuum_vacuum_insert_scale_factor=0",
        "autovacuum_vacuum_insert_threshold=5000",
        "autovacuum_vacuum_scale_factor=0",
        "autovacuum_vacuum_threshold=5000",
    ]
