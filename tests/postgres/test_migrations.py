"""Schema and migrations: versioned, idempotent, serialised across processes, never applied silently."""

from __future__ import annotations

import multiprocessing
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import DatabaseError, EnqueueOpts, InvalidOptions, JobState, SchemaOutOfDate
from alkstore.adapters.postgres import PostgresEngine, _migrate
from alkstore.adapters.postgres._migrations import Migration, exclusive_first, lock_key
from alkstore.adapters.postgres._sql import Statements
from alkstore.engine import Held
from tests.support import must_claim, wait_until

from . import _procs
from .conftest import PATIENCE, OpenStore, table

pytestmark = pytest.mark.postgres


def versions(db: psycopg.Connection[Any], schema: str) -> list[tuple[int, str]]:
    query = sql.SQL("SELECT version, name FROM {} ORDER BY version").format(table(schema, "schema_version"))
    return [(int(version), name) for version, name in db.execute(query)]


def expected_versions() -> list[tuple[int, str]]:
    return [(migration.version, migration.name) for migration in _migrate.migrations()]


def schema_exists(db: psycopg.Connection[Any], schema: str) -> bool:
    return db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone() is not None


def test_the_packaged_migrations_are_numbered_from_one_without_gaps() -> None:
    numbers = [migration.version for migration in _migrate.migrations()]
    assert numbers == list(range(1, len(numbers) + 1))
    assert _migrate.current_version() == numbers[-1]


def test_a_fresh_schema_migrates_on_open_when_asked(
    open_store: OpenStore, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    store = open_store(pg_schema, migrate=True)
    assert versions(db, pg_schema) == expected_versions()
    queue = store.queue("fresh")
    job_id = queue.enqueue({"n": 1})
    job = must_claim(queue)
    assert job.id == job_id
    job.ack()


def test_migrating_again_is_a_no_op(open_store: OpenStore, db: psycopg.Connection[Any], pg_schema: str) -> None:
    store = open_store(pg_schema, migrate=True)
    stamped = db.execute(sql.SQL("SELECT version, applied_at FROM {}").format(table(pg_schema, "schema_version")))
    before = stamped.fetchall()
    store.migrate()
    store.migrate()
    after = db.execute(sql.SQL("SELECT version, applied_at FROM {}").format(table(pg_schema, "schema_version")))
    assert after.fetchall() == before
    with psycopg.connect(db.info.dsn, autocommit=True) as conn:
        assert _migrate.apply(conn, Statements.for_schema(pg_schema), pg_schema) == []


def test_an_unmigrated_schema_refuses_to_open_and_names_the_command_to_run(
    pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    with pytest.raises(SchemaOutOfDate) as raised:
        alkstore.open(pg_dsn, schema=pg_schema)
    message = str(raised.value)
    assert "alkstore migrate --url" in message
    assert f"--schema {pg_schema}" in message
    assert "store.migrate()" in message
    assert "migrate=True" in message
    assert not schema_exists(db, pg_schema), "opening without migrate=True must not create anything"


def test_an_older_schema_is_out_of_date(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    open_store(pg_schema, migrate=True)
    latest = _migrate.current_version()
    db.execute(sql.SQL("DELETE FROM {} WHERE version = %s").format(table(pg_schema, "schema_version")), [latest])
    with pytest.raises(SchemaOutOfDate, match="alkstore migrate"):
        alkstore.open(pg_dsn, schema=pg_schema)


#: What code of schema version 1 wrote: an enqueue, then a claim of the first job (its lease 1).
_V1_ENQUEUE = (
    "INSERT INTO {}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts, schedule, boundary,"
    " enqueued_at) VALUES ('kept', %s, 'pending', 0, %s, NULL, 3, NULL, NULL, %s) RETURNING id"
)
_V1_CLAIM = (
    "UPDATE {}.jobs SET state = 'running', attempts = attempts + 1, lease = lease + 1, worker_id = 'old-worker',"
    " lease_until = %s WHERE id = %s RETURNING lease"
)


def test_a_version_1_schema_holding_jobs_upgrades_in_place_and_keeps_them(
    open_store: OpenStore, db: psycopg.Connection[Any], pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The schema and rows as code of version 1 left them: today's code cannot stand in for it,
    # since it reads what later versions added, so the rows are written as that code wrote them.
    every_migration = _migrate.migrations()
    monkeypatch.setattr(_migrate, "migrations", lambda: every_migration[:1])
    _migrate.apply(db, Statements.for_schema(pg_schema), pg_schema)
    monkeypatch.undo()
    assert versions(db, pg_schema) == [(1, every_migration[0].name)]
    at = datetime(2030, 1, 1, 12, tzinfo=UTC)
    schema = sql.Identifier(pg_schema)
    ids = []
    for n in (1, 2):
        row = db.execute(sql.SQL(_V1_ENQUEUE).format(schema), [f'{{"n":{n}}}'.encode(), at, at]).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    running_id, waiting = ids
    lease = db.execute(sql.SQL(_V1_CLAIM).format(schema), [at + timedelta(seconds=300), running_id]).fetchone()
    assert lease == (1,)

    new = open_store(pg_schema, migrate=True, clock=alkstore.ManualClock(at))

    assert versions(db, pg_schema) == expected_versions()
    kept, running = new.get_job(waiting), new.get_job(running_id)
    assert kept is not None
    assert running is not None
    assert (kept.payload, kept.state, kept.attempts, kept.run_at) == ({"n": 2}, JobState.PENDING, 0, at)
    assert (running.payload, running.state, running.attempts, running.worker_id) == (
        {"n": 1},
        JobState.RUNNING,
        1,
        "old-worker",
    )
    assert new.engine.ack([Held(running_id, 1)]) == []  # the lease taken under version 1 is still honoured
    assert new.get_job(running_id) is None
    claimed = must_claim(new.queue("kept"), "new-worker")
    assert claimed.id == waiting


def test_a_schema_newer_than_the_code_is_refused_with_a_clear_error(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    open_store(pg_schema, migrate=True)
    future = _migrate.current_version() + 1
    insert = sql.SQL("INSERT INTO {} (version, name) VALUES (%s, 'from_the_future')")
    db.execute(insert.format(table(pg_schema, "schema_version")), [future])
    for migrate in (False, True):
        with pytest.raises(DatabaseError, match="newer than this alkstore") as raised:
            alkstore.open(pg_dsn, schema=pg_schema, migrate=migrate)
        assert not isinstance(raised.value, SchemaOutOfDate)
    assert versions(db, pg_schema)[-1] == (future, "from_the_future")


def test_concurrent_migrating_threads_apply_each_version_once(
    pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    statements = Statements.for_schema(pg_schema)
    barrier = threading.Barrier(4)
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                barrier.wait(PATIENCE)
                applied.append(_migrate.apply(conn, statements, pg_schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    assert errors == []
    assert sorted(applied) == [[], [], [], [version for version, _ in expected_versions()]]
    assert versions(db, pg_schema) == expected_versions()


def test_concurrent_migrating_processes_end_with_one_set_of_versions(
    pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str
) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(3)
    processes = [context.Process(target=_procs.migrate, args=(pg_dsn, pg_schema, barrier)) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(PATIENCE * 2)
    assert [process.exitcode for process in processes] == [0, 0, 0]
    assert versions(db, pg_schema) == expected_versions()


@pytest.fixture
def odd_schema(db: psycopg.Connection[Any]) -> Iterator[str]:
    """A schema name that only works quoted: upper case, a space, a double and a single quote."""
    name = f'Odd "Sché\'ma" {uuid.uuid4().hex[:8]}'
    yield name
    db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_a_schema_name_that_needs_quoting_works_end_to_end(
    open_store: OpenStore, db: psycopg.Connection[Any], odd_schema: str
) -> None:
    store = open_store(odd_schema, migrate=True)
    assert engine_schema(store) == odd_schema
    assert schema_exists(db, odd_schema)
    queue = store.queue("q")
    first = queue.enqueue("a", EnqueueOpts(priority=1))
    queue.enqueue("b")
    job = must_claim(queue)
    assert job.id == first
    job.retry("again", delay=0)
    assert store.get_job(first) is not None
    lock = store.try_lock("l", "me", 10)
    assert lock is not None
    assert lock.release()
    store.schedule("s", "@every 1m", "q")
    assert [schedule.name for schedule in store.schedules()] == ["s"]
    assert versions(db, odd_schema) == expected_versions()


def engine_schema(store: alkstore.Store) -> str:
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    return engine.schema


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schema": ""}, "schema must be 1 to 63 bytes"),
        ({"schema": "s" * 64}, "schema must be 1 to 63 bytes"),
        ({"schema": "é" * 32}, "schema must be 1 to 63 bytes"),
        ({"schema": "pg_mine"}, "reserved by PostgreSQL"),
        ({"schema": "a\x00b"}, "NUL"),
        ({"schema": 7}, "schema must be a str"),
        ({"min_size": -1}, "min_size must be at least 0"),
        ({"min_size": 3, "max_size": 2}, "max_size must be at least 3"),
        ({"max_size": 0}, "max_size must be at least 1"),
        ({"max_size": True}, "max_size must be an int"),
        ({"migrate": "yes"}, "migrate must be a bool"),
        ({"pool_timeout": 0}, "pool_timeout must be a positive number"),
        ({"pool_timeout": 10}, "pool_timeout must be under the scheduler.s 10 s lease"),
        ({"connect_timeout": float("nan")}, "connect_timeout must be a positive number"),
        ({"pool_size": 3}, "unknown option"),
    ],
)
def test_bad_options_are_refused_before_connecting(options: dict[str, Any], message: str) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/nothing"
    with pytest.raises(InvalidOptions, match=message):
        alkstore.open(unreachable, **options)


def test_a_malformed_url_is_an_invalid_option() -> None:
    with pytest.raises(InvalidOptions, match="invalid PostgreSQL URL"):
        alkstore.open("postgresql://host/db?no_such_libpq_option=1")


def test_an_unreachable_server_fails_at_open_with_the_driver_error_as_cause() -> None:
    with pytest.raises(DatabaseError) as raised:
        alkstore.open("postgresql://nobody@127.0.0.1:1/nothing", connect_timeout=2)
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


def test_a_password_in_the_url_never_appears_in_the_error_of_an_unmigrated_schema(pg_dsn: str, pg_schema: str) -> None:
    parts = urlsplit(pg_dsn)
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or "postgres"
    with_password = urlunsplit((parts.scheme, f"{user}:s3cret@{host}", parts.path, parts.query, ""))
    with pytest.raises(SchemaOutOfDate) as raised:
        alkstore.open(with_password, schema=pg_schema)  # trust auth ignores the password
    assert "s3cret" not in str(raised.value)
    assert f"{user}:***@" in str(raised.value)


def test_a_migration_rolled_back_to_break_a_deadlock_is_tried_again_and_applied_once(
    pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A migration that is not online locks tables that running old workers hold: when the server breaks
    the deadlock by rolling the migration back, migrate tries the whole transaction again."""
    statements = Statements.for_schema(pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _migrate.apply(conn, statements, pg_schema)
    last = _migrate.migrations()[-1]
    db.execute(sql.SQL("DELETE FROM {} WHERE version = %s").format(table(pg_schema, "schema_version")), [last.version])
    # What the last version made (its triggers, functions, tables and columns, whatever its number), undone.
    for name, on in re.findall(
        r"^CREATE (?:CONSTRAINT )?TRIGGER (\w+) .*? ON (\w+)", last.text, re.MULTILINE | re.DOTALL
    ):
        db.execute(sql.SQL("DROP TRIGGER {} ON {}").format(sql.Identifier(name), table(pg_schema, on)))
    for kind, name in re.findall(r"^CREATE (TABLE|FUNCTION) (\w+)", last.text, re.MULTILINE)[::-1]:
        db.execute(sql.SQL("DROP {} {}").format(sql.SQL(kind), sql.Identifier(pg_schema, name)))
    for statement in last.text.split(";"):
        altered = re.search(r"^ALTER TABLE (\w+)", statement, re.MULTILINE)
        if altered is None:
            continue
        for column in re.findall(r"ADD COLUMN (\w+)", statement):
            db.execute(
                sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(table(pg_schema, altered[1]), sql.Identifier(column))
            )
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                applied.append(_migrate.apply(conn, statements, pg_schema))
        except BaseException as exc:
            errors.append(exc)

    with psycopg.connect(pg_dsn) as other:  # a transaction of other work, holding a lock the migration needs
        other.execute("SET deadlock_timeout = '30s'")  # the server breaks the cycle on the migration's side
        other.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(table(pg_schema, "schema_version")))
        migrator = threading.Thread(target=migrate)
        migrator.start()

        def migration_waits() -> bool:
            row = db.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                " AND query LIKE 'INSERT INTO%%schema_version%%'"
            ).fetchone()
            return row is not None and row[0] > 0

        wait_until(migration_waits, "the migration to wait for the version table")
        # ... while this work waits for the migration's lock: a cycle, which the server breaks
        other.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(pg_schema)])
        other.commit()
    migrator.join(PATIENCE)
    assert errors == []
    assert applied == [[last.version]]
    assert versions(db, pg_schema) == expected_versions()
    assert any("met a deadlock" in record.getMessage() for record in caplog.records)


def test_a_migration_that_raises_its_lock_on_a_busy_table_locks_it_first_and_meets_no_deadlock(
    pg_dsn: str, db: psycopg.Connection[Any], pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """From version 7, migration 8 builds indexes on ``jobs`` (SHARE: writes wait) and then drops a trigger
    of it (ACCESS EXCLUSIVE). A running worker's claim reads ``jobs`` (ACCESS SHARE) before it writes them:
    had the migration raised its lock midway, each would wait for the other (the rolling upgrade from
    version 7 met it). The migration locks ``jobs`` exclusively first, so the worker's write goes on."""
    statements = Statements.for_schema(pg_schema)
    every = _migrate.migrations()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_migrate, "migrations", lambda: every[:7])
        _migrate.apply(db, statements, pg_schema)
    applied: list[list[int]] = []
    errors: list[BaseException] = []
    migrating: list[int] = []

    def migrate() -> None:
        try:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                migrating.append(conn.info.backend_pid)
                applied.append(_migrate.apply(conn, statements, pg_schema))
        except BaseException as exc:
            errors.append(exc)

    def migration_waits() -> bool:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid = %s", migrating[:1] or [0]
        ).fetchone()
        return row is not None and row[0] > 0

    jobs = table(pg_schema, "jobs")
    with psycopg.connect(pg_dsn) as worker:
        worker.execute(sql.SQL("SELECT count(*) FROM {}").format(jobs))  # the claim's read: ACCESS SHARE, held
        migrator = threading.Thread(target=migrate)
        migrator.start()
        wait_until(migration_waits, "the migration to wait for the worker's lock on jobs")
        worker.execute(sql.SQL("UPDATE {} SET priority = priority").format(jobs))  # the claim's write goes on
        worker.commit()
    migrator.join(PATIENCE)
    assert errors == []
    assert applied == [[migration.version for migration in every[7:]]]
    assert versions(db, pg_schema) == expected_versions()
    assert not any("met a deadlock" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("CREATE INDEX i ON t (a); -- then\nDROP TRIGGER g ON t;", ["t"]),
        ("CREATE TRIGGER g AFTER DELETE ON t FOR EACH ROW EXECUTE FUNCTION f(); ALTER TABLE t ADD c int;", ["t"]),
        ("CREATE UNIQUE INDEX IF NOT EXISTS i ON ONLY t (a); ALTER TABLE IF EXISTS t ADD c int;", ["t"]),
        ("ALTER TABLE t ADD b int; CREATE INDEX i ON t (b); DROP TRIGGER g ON t;", []),  # exclusive from the start
        ("CREATE TABLE t (a int); CREATE INDEX ON t (a); ALTER TABLE t ADD b int;", []),  # made by the run
        ("CREATE INDEX i ON t (a); ALTER TABLE u ADD b int;", []),  # another table
        (
            "CREATE FUNCTION f() RETURNS void AS $f$ BEGIN CREATE INDEX i ON t (a); END $f$ LANGUAGE plpgsql;"
            " ALTER TABLE t ADD b int;",
            [],
        ),  # a body's statements run when it is called, not made
    ],
)
def test_the_tables_locked_exclusively_first_are_those_whose_lock_a_run_would_raise(
    text: str, first: list[str]
) -> None:
    assert exclusive_first([Migration(1, "m", text)]) == first


def test_of_the_packaged_migrations_only_runs_from_7_and_from_10_to_14_raise_a_lock() -> None:
    packaged = _migrate.migrations()[:17]  # the versions known when this was written; later ones add their own
    plans = {version: exclusive_first(packaged[version:]) for version in range(17)}
    raised = {version: plan for version, plan in plans.items() if plan}
    assert raised == {7: ["jobs"], **{version: ["dead_jobs"] for version in range(10, 15)}}
