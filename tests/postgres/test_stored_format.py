"""The stored format, pinned: what a live database depends on changes only with a migration.

A database written by this version is read by the next one, so a rename here (a column, a
function, the outbox's reserved prefix, the scheduler's lock name, the NOTIFY channel scheme,
the payload bytes) silently orphans existing data unless a migration carries it over. Each test
compares a freshly migrated schema, or what the engine writes and reads, with literals: a
change fails here until a migration and a conscious update of these literals go with it
(ADR 025). A new migration changes ``SCHEMA_VERSION`` and whatever it adds below.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import EnqueueOpts, InvalidPayload, JsonCodec, ManualClock, StopToken, Store
from alkstore.adapters.postgres import _migrate
from alkstore.engine import NewJob, ThroughputRecord, WorkerRecord
from alkstore.errors import LeadershipLost

from .conftest import PATIENCE, T0, OpenStore, engine_of, table

pytestmark = pytest.mark.postgres

#: The schema version this code writes, and the migrations that make it.
SCHEMA_VERSION = 21
MIGRATIONS = [
    (1, "initial"),
    (2, "job_checks_in_the_engine"),
    (3, "batches_config_and_delayed_jobs"),
    (4, "operations"),
    (5, "bounded_tables"),
    (6, "queue_controls"),
    (7, "kept_results"),
    (8, "promotion_straight_to_pending"),
    (9, "throughput"),
    (10, "dead_jobs_keep_their_attempts"),
    (11, "sweeps_keep_attempts"),
    (12, "action_log"),
    (13, "steps_and_events"),
    (14, "rate_limits"),
    (15, "dependencies"),
    (16, "task_figures"),
    (17, "workflow_gaps"),
    (18, "lighter_acks"),
    (19, "one_promotion_rule"),
    (20, "chain_wakes"),
    (21, "lighter_settle"),
]
#: The storage parameters migration 5 gives the jobs table (its own autovacuum trigger, ADR 023).
JOBS_RELOPTIONS = [
    "autovacuum_vacuum_threshold=5000",
    "autovacuum_vacuum_scale_factor=0",
    "autovacuum_vacuum_insert_threshold=5000",
    "autovacuum_vacuum_insert_scale_factor=0",
    "autovacuum_vacuum_cost_delay=0",
]
#: Migration 9's throughput table leaves half of each page free, so a report's update stays on its page (HOT).
THROUGHPUT_RELOPTIONS = ["fillfactor=50"]
#: Migration 12's rate_starts table likewise: a start's update of its next instant stays on its page.
RATE_STARTS_RELOPTIONS = ["fillfactor=50"]

_TS = "timestamp with time zone"
_C = ' COLLATE "C"'
#: Every table's columns in order: name, type, ``NOT NULL`` and a non-default collation.
TABLES: dict[str, list[tuple[str, str]]] = {
    "action_log": [
        ("id", "bigint NOT NULL"),
        ("at", f"{_TS} NOT NULL"),
        ("role", "text NOT NULL"),
        ("address", "text NOT NULL"),
        ("action", "text NOT NULL"),
        ("target", "text NOT NULL"),
        ("outcome", "text NOT NULL"),
    ],
    "dead_jobs": [
        ("id", "bigint NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("payload", "bytea NOT NULL"),
        ("priority", "integer NOT NULL"),
        ("run_at", f"{_TS} NOT NULL"),
        ("expires_at", _TS),
        ("attempts", "integer NOT NULL"),
        ("max_attempts", "integer NOT NULL"),
        ("last_error", "bytea NOT NULL"),
        ("schedule", "text" + _C),
        ("boundary", _TS),
        ("enqueued_at", f"{_TS} NOT NULL"),
        ("lease", "bigint NOT NULL"),
        ("died_at", f"{_TS} NOT NULL"),
        ("visibility_us", "bigint"),
        ("task", "text"),
        ("last_traceback", "bytea"),
        ("trace", "text"),
        ("ordering_key", "text" + _C),
        ("attempt_log", "bytea[]"),
        ("rate_key", "text" + _C),
        ("on_parent_failure", "text"),
    ],
    "jobs": [
        ("id", "bigint NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("payload", "bytea NOT NULL"),
        ("state", "text NOT NULL"),
        ("priority", "integer NOT NULL"),
        ("run_at", f"{_TS} NOT NULL"),
        ("expires_at", _TS),
        ("attempts", "integer NOT NULL"),
        ("max_attempts", "integer NOT NULL"),
        ("last_error", "bytea"),
        ("schedule", "text" + _C),
        ("boundary", _TS),
        ("enqueued_at", f"{_TS} NOT NULL"),
        ("worker_id", "text"),
        ("lease_until", _TS),
        ("lease", "bigint NOT NULL"),
        ("visibility_us", "bigint"),
        ("task", "text"),
        ("last_traceback", "bytea"),
        ("trace", "text"),
        ("unique_key", "text" + _C),
        ("unique_running", "boolean NOT NULL"),
        ("ordering_key", "text" + _C),
        ("cancel_requested", "boolean NOT NULL"),
        ("attempt_log", "bytea[]"),
        ("claimed_at", _TS),
        ("rate_key", "text" + _C),
        ("dependents", "integer NOT NULL"),
        ("parents_left", "integer NOT NULL"),
        ("on_parent_failure", "text"),
    ],
    "job_dependencies": [
        ("child", "bigint NOT NULL"),
        ("parent", "bigint NOT NULL"),
        ("position", "integer NOT NULL"),
        ("state", "text NOT NULL"),
        ("result", "bytea"),
    ],
    "locks": [
        ("name", "text NOT NULL" + _C),
        ("owner", "text NOT NULL"),
        ("token", "bigint NOT NULL"),
        ("expires_at", f"{_TS} NOT NULL"),
    ],
    "queues": [
        ("name", "text NOT NULL" + _C),
        ("visibility_us", "bigint"),
        ("max_attempts", "integer"),
        ("backoff_base_us", "bigint"),
        ("backoff_cap_us", "bigint"),
        ("priority", "integer"),
        ("concurrency", "integer"),
        ("paused", "boolean NOT NULL"),
        ("keep_results_us", "bigint"),
        ("rate_count", "integer"),
        ("rate_per_us", "bigint"),
        ("key_rate_count", "integer"),
        ("key_rate_per_us", "bigint"),
    ],
    "rate_starts": [
        ("queue", "text NOT NULL" + _C),
        ("key", "text NOT NULL" + _C),
        ("next_at", f"{_TS} NOT NULL"),
    ],
    "results": [
        ("id", "bigint NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("payload", "bytea NOT NULL"),
        ("task", "text"),
        ("attempts", "integer NOT NULL"),
        ("max_attempts", "integer NOT NULL"),
        ("enqueued_at", f"{_TS} NOT NULL"),
        ("started_at", _TS),
        ("finished_at", f"{_TS} NOT NULL"),
        ("keep_until", f"{_TS} NOT NULL"),
        ("worker_id", "text"),
        ("result", "bytea NOT NULL"),
        ("attempt_log", "bytea[]"),
    ],
    "events": [
        ("name", "text NOT NULL" + _C),
        ("payload", "bytea NOT NULL"),
        ("at", f"{_TS} NOT NULL"),
        ("expires_at", f"{_TS} NOT NULL"),
    ],
    "schedules": [
        ("name", "text NOT NULL" + _C),
        ("spec", "text NOT NULL"),
        ("interval_s", "integer NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("payload", "bytea NOT NULL"),
        ("priority", "integer"),
        ("max_attempts", "integer"),
        ("expires_us", "bigint"),
        ("next_boundary", f"{_TS} NOT NULL"),
        ("task", "text"),
        ("last_boundary", _TS),
        ("anchor", _TS),
    ],
    "schema_version": [
        ("version", "integer NOT NULL"),
        ("name", "text NOT NULL"),
        ("applied_at", f"{_TS} NOT NULL"),
    ],
    "steps": [
        ("job_id", "bigint NOT NULL"),
        ("name", "text NOT NULL" + _C),
        ("result", "bytea NOT NULL"),
        ("at", f"{_TS} NOT NULL"),
    ],
    "task_figures": [
        ("minute", f"{_TS} NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("task", "text NOT NULL" + _C),
        ("done", "bigint NOT NULL"),
        ("failed", "bigint NOT NULL"),
        ("run_ms", "double precision NOT NULL"),
        ("latency_ms", "double precision NOT NULL"),
    ],
    "throughput": [
        ("minute", f"{_TS} NOT NULL"),
        ("queue", "text NOT NULL" + _C),
        ("done", "bigint NOT NULL"),
        ("failed", "bigint NOT NULL"),
    ],
    "waits": [
        ("job_id", "bigint NOT NULL"),
        ("until", f"{_TS} NOT NULL"),
        ("event", "text" + _C),
    ],
    "workers": [
        ("id", "text NOT NULL" + _C),
        ("host", "text NOT NULL"),
        ("pid", "integer NOT NULL"),
        ("queues", "text[] NOT NULL"),
        ("concurrency", "integer NOT NULL"),
        ("started_at", f"{_TS} NOT NULL"),
        ("seen_at", f"{_TS} NOT NULL"),
        ("running", "bigint NOT NULL"),
        ("processed", "bigint NOT NULL"),
        ("failed", "bigint NOT NULL"),
    ],
}
SEQUENCES = ["action_log_id_seq", "job_ids", "lock_tokens"]
#: Every index, by name, as ``pg_indexes`` defines it (``{s}`` for the schema).
INDEXES = {
    "action_log_pkey": "CREATE UNIQUE INDEX action_log_pkey ON {s}.action_log USING btree (id)",
    "events_expiry": "CREATE INDEX events_expiry ON {s}.events USING btree (expires_at)",
    "events_pkey": "CREATE UNIQUE INDEX events_pkey ON {s}.events USING btree (name)",
    "dead_jobs_pkey": "CREATE UNIQUE INDEX dead_jobs_pkey ON {s}.dead_jobs USING btree (id)",
    "dead_jobs_queue": "CREATE INDEX dead_jobs_queue ON {s}.dead_jobs USING btree (queue, died_at)",
    "job_dependencies_parent": (
        "CREATE INDEX job_dependencies_parent ON {s}.job_dependencies USING btree (parent)"
        " WHERE (state = 'waiting'::text)"
    ),
    "job_dependencies_pkey": (
        "CREATE UNIQUE INDEX job_dependencies_pkey ON {s}.job_dependencies USING btree (child, parent)"
    ),
    "jobs_claim": (
        "CREATE INDEX jobs_claim ON {s}.jobs USING btree (queue, priority DESC, run_at, id)"
        " WHERE (state = 'pending'::text)"
    ),
    "jobs_delayed": "CREATE INDEX jobs_delayed ON {s}.jobs USING btree (queue, run_at) WHERE (state = 'delayed'::text)",
    "jobs_expiry": (
        "CREATE INDEX jobs_expiry ON {s}.jobs USING btree (queue, expires_at)"
        " WHERE ((state = ANY (ARRAY['pending'::text, 'delayed'::text])) AND (expires_at IS NOT NULL))"
    ),
    "jobs_lease": (
        "CREATE INDEX jobs_lease ON {s}.jobs USING btree (queue, lease_until) WHERE (state = 'running'::text)"
    ),
    "jobs_ordering": (
        "CREATE INDEX jobs_ordering ON {s}.jobs USING btree (queue, ordering_key, id) WHERE (ordering_key IS NOT NULL)"
    ),
    "jobs_ordering_head": (
        "CREATE INDEX jobs_ordering_head ON {s}.jobs USING btree (queue, ordering_key)"
        " WHERE ((ordering_key IS NOT NULL) AND (state <> 'waiting'::text))"
    ),
    "jobs_pkey": "CREATE UNIQUE INDEX jobs_pkey ON {s}.jobs USING btree (id)",
    "jobs_waiting": "CREATE INDEX jobs_waiting ON {s}.jobs USING btree (queue, id) WHERE (state = 'waiting'::text)",
    "jobs_unique": (
        "CREATE UNIQUE INDEX jobs_unique ON {s}.jobs USING btree (queue, unique_key) WHERE (unique_key IS NOT NULL)"
    ),
    "locks_pkey": "CREATE UNIQUE INDEX locks_pkey ON {s}.locks USING btree (name)",
    "queues_pkey": "CREATE UNIQUE INDEX queues_pkey ON {s}.queues USING btree (name)",
    "rate_starts_pkey": "CREATE UNIQUE INDEX rate_starts_pkey ON {s}.rate_starts USING btree (queue, key)",
    "results_expiry": "CREATE INDEX results_expiry ON {s}.results USING btree (keep_until)",
    "results_pkey": "CREATE UNIQUE INDEX results_pkey ON {s}.results USING btree (id)",
    "results_queue": "CREATE INDEX results_queue ON {s}.results USING btree (queue, finished_at DESC, id DESC)",
    "schedules_next_boundary": ("CREATE INDEX schedules_next_boundary ON {s}.schedules USING btree (next_boundary)"),
    "schedules_pkey": "CREATE UNIQUE INDEX schedules_pkey ON {s}.schedules USING btree (name)",
    "schema_version_pkey": "CREATE UNIQUE INDEX schema_version_pkey ON {s}.schema_version USING btree (version)",
    "steps_pkey": "CREATE UNIQUE INDEX steps_pkey ON {s}.steps USING btree (job_id, name)",
    "task_figures_pkey": (
        "CREATE UNIQUE INDEX task_figures_pkey ON {s}.task_figures USING btree (minute, queue, task)"
    ),
    "throughput_pkey": "CREATE UNIQUE INDEX throughput_pkey ON {s}.throughput USING btree (minute, queue)",
    "waits_event": "CREATE INDEX waits_event ON {s}.waits USING btree (event) WHERE (event IS NOT NULL)",
    "waits_pkey": "CREATE UNIQUE INDEX waits_pkey ON {s}.waits USING btree (job_id)",
    "workers_pkey": "CREATE UNIQUE INDEX workers_pkey ON {s}.workers USING btree (id)",
}
#: Every function, by its versioned name and arguments, with its result type. Older versions stay:
#: a process still running the previous release calls them until it is replaced.
FUNCTIONS = {
    f"bury_3(p_ids bigint[], p_fences bigint[], p_errors bytea[], p_tracebacks bytea[], p_now {_TS})": ("SETOF bigint"),
    f"allowance_6(p_queue text, p_now {_TS}, p_limit integer)": "integer",
    f"bury_6(p_ids bigint[], p_fences bigint[], p_errors bytea[], p_tracebacks bytea[], p_now {_TS})": ("SETOF bigint"),
    (
        "bury_10(p_ids bigint[], p_fences bigint[], p_errors bytea[], p_tracebacks bytea[], p_attempts bytea[],"
        f" p_now {_TS})"
    ): "SETOF bigint",
    "channel(p_schema text, p_queue text)": "text",
    (
        f"claim(p_queue text, p_worker text, p_now {_TS}, p_lease_until {_TS},"
        " p_lease_expired_error bytea, p_job_expired_error bytea)"
    ): "SETOF {s}.jobs",
    "listen(p_schema text, p_queue text)": "void",
    "lock_ordering_key_6(p_schema text, p_queue text, p_key text)": "void",
    "next_job_ids(p_count integer)": "SETOF bigint",
    f"queue_counts_4(p_queue text, p_now {_TS}, p_cap bigint)": (
        f"TABLE(ready bigint, delayed bigint, running bigint, dead bigint, oldest_ready {_TS})"
    ),
    f"queue_counts_6(p_queue text, p_now {_TS}, p_cap bigint)": (
        f"TABLE(ready bigint, delayed bigint, running bigint, dead bigint, oldest_ready {_TS},"
        " waiting bigint, paused boolean)"
    ),
    "promote_6()": "trigger",
    "promote_8()": "trigger",
    "promote_15(p_children bigint[])": "void",
    f"follow_parent_15(p_child bigint, p_parent bigint, p_died_at {_TS})": "void",
    "settle_15()": "trigger",
    "settle_18()": "trigger",
    "wake_18()": "trigger",
    f"promoted_19(p_parents_left integer, p_settled integer, p_run_at {_TS})": "text",
    "promote_19(p_children bigint[])": "void",
    f"follow_parent_19(p_child bigint, p_parent bigint, p_died_at {_TS})": "void",
    "settle_19()": "trigger",
    "settle_20()": "trigger",
    "settle_21()": "trigger",
    "keep_on_death_17()": "trigger",
    "unlink_dead_17()": "trigger",
    "unlink_dead_15()": "trigger",
    "queues_4()": "SETOF text",
    (f"rate_start_14(p_queue text, p_key text, p_now {_TS}, p_every_us bigint, p_key_every_us bigint)"): "boolean",
    f"sweep(p_queue text, p_now {_TS}, p_lease_expired_error bytea, p_job_expired_error bytea)": "void",
    f"sweep_3(p_queue text, p_now {_TS}, p_lease_expired_error bytea, p_job_expired_error bytea)": "void",
    f"sweep_6(p_queue text, p_now {_TS}, p_lease_expired_error bytea, p_job_expired_error bytea)": "void",
    f"sweep_11(p_queue text, p_now {_TS}, p_lease_expired_error bytea, p_job_expired_error bytea)": "void",
    (
        f"sweep_17(p_queue text, p_now {_TS}, p_lease_expired_error bytea, p_job_expired_error bytea,"
        " p_waiting boolean)"
    ): "void",
    f"try_lock(p_name text, p_owner text, p_now {_TS}, p_expires_at {_TS})": "SETOF {s}.locks",
}
#: The reserved names a database holds rows under.
OUTBOX_QUEUE = "__alkstore_outbox:{outbox}"
SCHEDULER_LOCK = "__alkstore_scheduler"


def channel(schema: str, queue: str) -> str:
    """The NOTIFY channel scheme: ``alkstore_`` and 40 hex digits of sha256 of ``len(schema):schema:queue``."""
    digest = hashlib.sha256(f"{len(schema)}:{schema}:{queue}".encode()).hexdigest()
    return "alkstore_" + digest[:40]


@pytest.fixture(scope="module")
def schema(pg_dsn: str, pg_module_schema: str) -> str:
    """The module's schema, freshly migrated (by opening and closing a store on it)."""
    import alkstore

    alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True, max_size=1).close()
    return pg_module_schema


def _rows(db: psycopg.Connection[Any], query: str, schema: str) -> list[tuple[Any, ...]]:
    return db.execute(query, {"schema": schema}).fetchall()


def test_the_schema_version_is_pinned(db: psycopg.Connection[Any], schema: str) -> None:
    assert _migrate.current_version() == SCHEMA_VERSION
    assert [(migration.version, migration.name) for migration in _migrate.migrations()] == MIGRATIONS
    stored = db.execute(
        sql.SQL("SELECT version, name FROM {} ORDER BY version").format(table(schema, "schema_version"))
    )
    assert stored.fetchall() == MIGRATIONS


def test_tables_and_columns_are_pinned(db: psycopg.Connection[Any], schema: str) -> None:
    columns = _rows(
        db,
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, co.collname"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_collation co ON co.oid = a.attcollation AND co.collname <> 'default'"
        " WHERE n.nspname = %(schema)s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY c.relname, a.attnum",
        schema,
    )
    found: dict[str, list[tuple[str, str]]] = {}
    for relation, name, kind, not_null, collation in columns:
        shown = kind + (" NOT NULL" if not_null else "") + (f' COLLATE "{collation}"' if collation else "")
        found.setdefault(relation, []).append((name, shown))
    assert found == TABLES
    sequences = _rows(
        db,
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %(schema)s AND c.relkind = 'S' ORDER BY 1",
        schema,
    )
    assert [name for (name,) in sequences] == SEQUENCES


def test_the_tables_storage_parameters_are_pinned(db: psycopg.Connection[Any], schema: str) -> None:
    query = (
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %(schema)s AND c.relkind = 'r' AND c.reloptions IS NOT NULL ORDER BY c.relname"
    )
    assert _rows(db, query, schema) == [
        ("jobs", JOBS_RELOPTIONS),
        ("rate_starts", RATE_STARTS_RELOPTIONS),
        ("task_figures", THROUGHPUT_RELOPTIONS),
        ("throughput", THROUGHPUT_RELOPTIONS),
    ]


def test_indexes_are_pinned(db: psycopg.Connection[Any], schema: str) -> None:
    rows = _rows(db, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s ORDER BY 1", schema)
    assert {name: definition.replace(schema, "{s}") for name, definition in rows} == INDEXES


def test_functions_are_pinned_by_their_versioned_names(db: psycopg.Connection[Any], schema: str) -> None:
    rows = _rows(
        db,
        "SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',"
        " pg_get_function_result(p.oid)"
        " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s ORDER BY 1",
        schema,
    )
    assert {name: result.replace(schema, "{s}") for name, result in rows} == FUNCTIONS


def test_the_notify_channel_scheme_is_pinned_by_a_notify_observed(
    pg_dsn: str, db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    queue = "pinned: the channel of any queue name, ünïcode too"
    expected = channel(schema, queue)
    assert db.execute(
        sql.SQL("SELECT {}.channel(%s, %s)").format(sql.Identifier(schema)), [schema, queue]
    ).fetchone() == (expected,)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(expected)))
        open_store().queue(queue).enqueue({"n": 1})
        heard = [note.channel for note in listener.notifies(timeout=PATIENCE, stop_after=1)]
    assert heard == [expected]


def test_the_payload_encoding_is_pinned(db: psycopg.Connection[Any], schema: str, open_store: OpenStore) -> None:
    queue = open_store().queue("payload-bytes")
    stored = {
        queue.enqueue(
            {"text": "é ☃", "list": [1, 2.5, None, True]}
        ): b'{"text":"\xc3\xa9 \xe2\x98\x83","list":[1,2.5,null,true]}',
        queue.enqueue(b"\x00raw\xff"): b"\x00\x00raw\xff",
        queue.enqueue("plain"): b'"plain"',
    }
    query = sql.SQL("SELECT id, payload FROM {} WHERE queue = %s").format(table(schema, "jobs"))
    assert {job_id: bytes(payload) for job_id, payload in db.execute(query, ["payload-bytes"])} == stored


def test_the_throughput_counts_are_pinned(db: psycopg.Connection[Any], schema: str, open_store: OpenStore) -> None:
    store = open_store()
    minute = T0.replace(second=0, microsecond=0)
    worker = WorkerRecord("pinned", "web-1", 1, ("q",), 1, T0, T0)
    store.engine.record_worker(worker, [ThroughputRecord("pinned-q", minute, 3, 1)])
    store.engine.record_worker(worker, [ThroughputRecord("pinned-q", minute, 2, 0)])
    query = sql.SQL("SELECT minute, queue, done, failed FROM {} WHERE queue = %s").format(table(schema, "throughput"))
    assert db.execute(query, ["pinned-q"]).fetchall() == [(minute, "pinned-q", 5, 1)]


def test_a_kept_result_and_its_attempt_log_are_pinned(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    store = open_store(clock=ManualClock(T0))
    queue = store.queue("kept-bytes")
    queue.configure(keep_results=60)
    job_id = queue.enqueue({"n": 1})
    first = queue.claim("w1")
    assert first is not None
    first.retry("boom", delay=0)
    second = queue.claim("w2")
    assert second is not None
    second.ack(result={"é": [1, None]})
    row = db.execute(
        sql.SQL("SELECT result, attempt_log, keep_until - finished_at FROM {} WHERE id = %s").format(
            table(schema, "results")
        ),
        [job_id],
    ).fetchone()
    assert row is not None
    result, log, kept = row
    assert bytes(result) == b'{"\xc3\xa9":[1,null]}'
    at = T0.isoformat().encode()  # failed, and started (claimed), at T0
    assert [bytes(entry) for entry in log] == [b'[2,"boom",null,null,"w1","' + at + b'","' + at + b'"]']
    assert kept == timedelta(seconds=60)
    stored = db.execute(
        sql.SQL("SELECT keep_results_us FROM {} WHERE name = %s").format(table(schema, "queues")), ["kept-bytes"]
    ).fetchone()
    assert stored == (60_000_000,)


def _insert_job(db: psycopg.Connection[Any], schema: str, queue: str, payload: bytes) -> int:
    """A ready job written the way an earlier release wrote it: literal SQL, the stored format only."""
    row = db.execute(
        sql.SQL(
            "INSERT INTO {} (queue, payload, state, priority, run_at, max_attempts, enqueued_at)"
            " VALUES (%s, %s, 'pending', 0, now() - interval '1 second', 3, now() - interval '1 second') RETURNING id"
        ).format(table(schema, "jobs")),
        [queue, payload],
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_jobs_stored_in_the_old_format_decode(db: psycopg.Connection[Any], schema: str, open_store: OpenStore) -> None:
    written = {
        _insert_job(db, schema, "old-format", b'{"n":1,"s":"\xc3\xa9"}'): {"n": 1, "s": "é"},
        _insert_job(db, schema, "old-format", b"\x00\x01\x02"): b"\x01\x02",
        _insert_job(db, schema, "old-format", b"[]"): [],
    }
    queue = open_store().queue("old-format")
    claimed = {}
    for _ in written:
        job = queue.claim("reader")
        assert job is not None
        claimed[job.id] = job.payload
        job.ack()
    assert claimed == written
    with pytest.raises(InvalidPayload, match="not valid JSON"):
        JsonCodec().decode(b"\xff")


def test_the_outbox_prefix_is_pinned(db: psycopg.Connection[Any], schema: str, open_store: OpenStore) -> None:
    outbox = open_store().outbox("orders")
    outbox.enqueue({"sent": 1})
    query = sql.SQL("SELECT queue FROM {} WHERE queue LIKE %s").format(table(schema, "jobs"))
    assert [queue for (queue,) in db.execute(query, ["%orders"])] == [OUTBOX_QUEUE.format(outbox="orders")]
    # A message an earlier release stored is delivered by this one.
    _insert_job(db, schema, OUTBOX_QUEUE.format(outbox="legacy"), b'{"sent":2}')
    delivered: list[Any] = []
    assert open_store().outbox("legacy").run_once("courier", lambda payload, job: delivered.append(payload))
    assert delivered == [{"sent": 2}]


def test_the_scheduler_lock_name_is_pinned(db: psycopg.Connection[Any], schema: str, open_store: OpenStore) -> None:
    clock = ManualClock(T0)
    store: Store = open_store(clock=clock)
    db.execute(
        sql.SQL("INSERT INTO {} (name, owner, token, expires_at) VALUES (%s, 'old-leader', 1, %s)").format(
            table(schema, "locks")
        ),
        [SCHEDULER_LOCK, T0 + timedelta(minutes=1)],
    )
    leader = store.leader()
    assert leader is not None
    assert leader.owner == "old-leader"
    with pytest.raises(LeadershipLost, match="another runner holds the scheduler lease"):
        store.run_schedules(StopToken())


def test_a_jobs_text_columns_are_utf8_and_read_back_into_every_field(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    row = db.execute(
        sql.SQL(
            "INSERT INTO {} (queue, payload, state, priority, run_at, max_attempts, enqueued_at, attempts,"
            " last_error, last_traceback, task, trace, visibility_us)"
            " VALUES ('text-columns', '1', 'pending', 0, now(), 3, now(), 1, %s, %s, 'send', 'tp-1', 30000000)"
            " RETURNING id"
        ).format(table(schema, "jobs")),
        ["é failed".encode(), "Traceback …\nValueError: é\n".encode()],
    ).fetchone()
    assert row is not None
    store = open_store()
    record = engine_of(store).get_job(int(row[0]))
    assert record is not None
    assert (record.last_error, record.last_traceback, record.task, record.trace, record.visibility) == (
        "é failed",
        "Traceback …\nValueError: é\n",
        "send",
        "tp-1",
        timedelta(seconds=30),
    )


def test_a_failed_attempts_traceback_is_stored_as_utf8_text(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    queue = open_store().queue("tracebacks")
    queue.enqueue(1)
    job = queue.claim("w")
    assert job is not None
    try:
        raise ValueError("é")
    except ValueError as exc:
        job.retry(exc)
    stored = db.execute(
        sql.SQL("SELECT last_error, last_traceback FROM {} WHERE id = %s").format(table(schema, "jobs")), [job.id]
    ).fetchone()
    assert stored is not None
    assert bytes(stored[0]) == "é".encode()
    assert bytes(stored[1]).decode().rstrip().endswith("ValueError: é")


def test_a_job_due_at_once_is_stored_pending_and_one_ahead_delayed(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    """The claim reads 'pending' rows through its index; a due 'delayed' one costs a sweep first."""
    queue = open_store(clock=ManualClock(T0)).queue("states")
    ids = [queue.enqueue(n) for n in range(3)]
    jobs = [queue.claim("w") for _ in ids]
    assert all(job is not None for job in jobs)
    first, second, third = (job for job in jobs if job is not None)
    first.retry("again", delay=0)
    second.retry("later", delay=60)
    third.release()
    query = sql.SQL("SELECT id, state FROM {} WHERE queue = 'states'").format(table(schema, "jobs"))
    assert dict(db.execute(query).fetchall()) == {first.id: "pending", second.id: "delayed", third.id: "pending"}


def test_every_insert_stores_a_job_due_at_once_pending_and_one_ahead_delayed(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    """Each insert statement decides the state itself: a job due at the insert's instant is
    'pending' (the claim's index), one ahead 'delayed' -- one job, a batch alike, a batch of
    differing jobs, keyed jobs, a requeued dead job and a schedule's fire."""
    clock = ManualClock(T0)
    store = open_store(clock=clock)
    ahead = T0 + timedelta(seconds=60)

    def job(run_at: Any, priority: int = 0, ordering_key: str | None = None) -> NewJob:
        return NewJob("inserts", b"1", priority, run_at, None, 3, ordering_key=ordering_key)

    inserts = {
        "one": ([job(T0)], [job(ahead)]),
        "alike": ([job(T0), job(T0)], [job(ahead), job(ahead)]),
        "differing": ([job(T0, 0), job(T0, 1)], [job(ahead, 0), job(ahead, 1)]),
        "keyed": ([job(T0, ordering_key="a")], [job(ahead, ordering_key="b")]),
    }
    expected: dict[int, str] = {}
    for due, later in inserts.values():
        expected.update(dict.fromkeys(map(int, store.engine.enqueue(due, T0)), "pending"))
        expected.update(dict.fromkeys(map(int, store.engine.enqueue(later, T0)), "delayed"))
    queue = store.queue("inserts")
    requeued = queue.enqueue("dies", EnqueueOpts(max_attempts=1, priority=9))
    dying = queue.claim("w")
    assert dying is not None
    assert dying.id == requeued
    dying.fail("boom")
    assert store.requeue_dead(requeued)
    expected[int(requeued)] = "pending"
    store.schedule("inserted", "@every 1m", "inserts")
    clock.advance(60)
    (fire,) = store.tick()
    assert fire.job_id is not None
    expected[int(fire.job_id)] = "pending"
    query = sql.SQL("SELECT id, state FROM {} WHERE queue = 'inserts'").format(table(schema, "jobs"))
    assert dict(db.execute(query).fetchall()) == expected


def test_the_next_job_of_an_ordering_key_is_promoted_pending_when_due_and_delayed_when_not(
    db: psycopg.Connection[Any], schema: str, open_store: OpenStore
) -> None:
    """Promotion (promote_8) spares the next claim a sweep when the promoted job is due by the database's
    clock; one whose run_at is still ahead is promoted delayed, for the claim's sweep to make pending."""
    store = open_store()
    queue = store.queue("lines")
    keyed = EnqueueOpts(ordering_key="k")
    head, due = queue.enqueue("head", keyed), queue.enqueue("next", keyed)
    later = EnqueueOpts(ordering_key="later")
    ahead_head, ahead = (
        queue.enqueue("head", later),
        queue.enqueue("next", EnqueueOpts(ordering_key="later", delay=3600)),
    )
    query = sql.SQL("SELECT id, state FROM {} WHERE queue = 'lines'").format(table(schema, "jobs"))
    assert dict(db.execute(query).fetchall()) == {
        head: "pending",
        due: "waiting",
        ahead_head: "pending",
        ahead: "waiting",
    }
    heads = queue.claim_many("w", 2)
    assert sorted(job.id for job in heads) == [head, ahead_head]
    for job in heads:
        job.ack()
    assert dict(db.execute(query).fetchall()) == {due: "pending", ahead: "delayed"}
