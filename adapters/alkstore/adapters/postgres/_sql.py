"""Every SQL statement of the Postgres engine, by name, composed once per schema.

A template names the schema as ``{s}``, filled with ``psycopg.sql.Identifier`` (so any schema
name is quoted correctly); values are always bound parameters (``%(name)s``), never formatted
into the text. Functions such as ``{s}.claim`` are created by the migrations.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

__all__ = ["Statements"]

_JOB = (
    "id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts, last_error, "
    "schedule, boundary, enqueued_at, worker_id, lease_until, lease"
)
#: What a claim returns: the job's columns but those the claim itself sets (queue, state, worker, lease end).
_CLAIMED = (
    "id, payload, priority, run_at, expires_at, attempts, max_attempts, last_error, schedule, boundary, "
    "enqueued_at, lease"
)
_DEAD = (
    "id, queue, payload, priority, run_at, expires_at, attempts, max_attempts, last_error, "
    "schedule, boundary, enqueued_at, lease"
)
_SCHEDULE = "name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, next_boundary"
_LOCK = "name, owner, token, expires_at"

_TEMPLATES: dict[str, str] = {
    # -- schema and migrations ---------------------------------------------------------------
    "version_table_exists": "SELECT to_regclass(quote_ident(%(schema)s) || '.schema_version') IS NOT NULL",
    "schema_version": "SELECT coalesce(max(version), 0) FROM {s}.schema_version",
    "migration_lock": "SELECT pg_advisory_xact_lock(%(key)s)",
    "create_schema": "CREATE SCHEMA IF NOT EXISTS {s}",
    "create_version_table": (
        "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
        " version integer PRIMARY KEY,"
        " name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ),
    "use_schema": "SET LOCAL search_path TO {s}",
    "record_version": "INSERT INTO {s}.schema_version (version, name) VALUES (%(version)s, %(name)s)",
    "use_utc": "SET TIME ZONE 'UTC'",
    # -- jobs ----------------------------------------------------------------------------------
    "enqueue": (
        "WITH new AS ("
        " INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      schedule, boundary, enqueued_at)"
        " VALUES (%(queue)s, %(payload)s, 'pending', %(priority)s, %(run_at)s, %(expires_at)s,"
        "         %(max_attempts)s, %(schedule)s, %(boundary)s, %(now)s)"
        " RETURNING id)"
        " SELECT id, pg_notify(%(channel)s, '') FROM new"
    ),
    "channel": "SELECT {s}.channel(%(schema)s, %(queue)s)",
    # The claim, in one statement: a look for anything to sweep (each probe a range scan of a
    # partial index that stops at the first hit), then the best runnable job. Most claims find
    # nothing to sweep and lease the job here, in the statement's snapshot; otherwise the
    # statement leaves the job alone and calls the claim function instead, which sweeps and
    # then claims in snapshots of their own, so the claim sees the sweeps' effects.
    "claim": (
        "WITH sweep AS MATERIALIZED ("
        " SELECT (SELECT lease_until FROM {s}.jobs"
        "          WHERE queue = %(queue)s AND state = 'running' AND lease_until <= %(now)s"
        "          ORDER BY lease_until LIMIT 1) IS NOT NULL"
        "     OR (SELECT expires_at FROM {s}.jobs"
        "          WHERE queue = %(queue)s AND state = 'pending' AND expires_at <= %(now)s"
        "          ORDER BY expires_at LIMIT 1) IS NOT NULL AS needed),"
        " claimed AS ("
        " UPDATE {s}.jobs SET state = 'running', attempts = attempts + 1, lease = lease + 1,"
        "                     worker_id = %(worker)s, lease_until = %(lease_until)s"
        " WHERE id = ("
        "  SELECT id FROM {s}.jobs"
        "   WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s"
        "     AND (expires_at IS NULL OR expires_at > %(now)s)"
        "     AND NOT (SELECT needed FROM sweep)"
        "   ORDER BY priority DESC, run_at, id"
        "   LIMIT 1"
        "   FOR UPDATE SKIP LOCKED)"
        " RETURNING " + _CLAIMED + ")"
        " SELECT " + _CLAIMED + " FROM claimed"
        " UNION ALL"
        " SELECT " + _CLAIMED + " FROM {s}.claim(%(queue)s, %(worker)s, %(now)s, %(lease_until)s,"
        "                                        %(lease_expired_error)s, %(job_expired_error)s)"
        " WHERE (SELECT needed FROM sweep)"
    ),
    "listen": "SELECT {s}.listen(%(schema)s, %(queue)s)",
    "unlisten": "UNLISTEN *",
    # The fenced calls return a row when the lease still held (and changed it), none otherwise.
    "ack": "DELETE FROM {s}.jobs WHERE id = %(id)s AND state = 'running' AND lease = %(lease)s RETURNING id",
    "retry": (
        "WITH job AS ("
        " UPDATE {s}.jobs SET state = 'pending', run_at = %(run_at)s, last_error = %(error)s,"
        "                     worker_id = NULL, lease_until = NULL"
        " WHERE id = %(id)s AND state = 'running' AND lease = %(lease)s"
        " RETURNING queue)"
        " SELECT pg_notify({s}.channel(%(schema)s, queue), '') FROM job"
    ),
    "bury": (
        "WITH job AS ("
        " DELETE FROM {s}.jobs WHERE id = %(id)s AND state = 'running' AND lease = %(lease)s"
        " RETURNING " + _DEAD + ")"
        " INSERT INTO {s}.dead_jobs (" + _DEAD + ", died_at)"
        " SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts, %(error)s,"
        "        schedule, boundary, enqueued_at, lease, %(now)s"
        " FROM job"
        " RETURNING id"
    ),
    "heartbeat": (
        "UPDATE {s}.jobs SET lease_until = %(lease_until)s"
        " WHERE id = %(id)s AND state = 'running' AND lease = %(lease)s"
        " RETURNING id"
    ),
    "get_job": (
        "SELECT " + _JOB + ", NULL::timestamptz AS died_at FROM {s}.jobs WHERE id = %(id)s"
        " UNION ALL"
        " SELECT id, queue, payload, 'dead', priority, run_at, expires_at, attempts, max_attempts, last_error,"
        "        schedule, boundary, enqueued_at, NULL, NULL, lease, died_at"
        " FROM {s}.dead_jobs WHERE id = %(id)s"
    ),
    "requeue_dead": (
        "WITH dead AS (DELETE FROM {s}.dead_jobs WHERE id = %(id)s RETURNING " + _DEAD + "),"
        " job AS ("
        " INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,"
        "                      last_error, schedule, boundary, enqueued_at, lease)"
        " SELECT id, queue, payload, 'pending', priority, %(now)s, NULL, 0, max_attempts,"
        "        last_error, schedule, boundary, enqueued_at, lease"
        " FROM dead"
        " RETURNING queue)"
        " SELECT pg_notify({s}.channel(%(schema)s, queue), '') FROM job"
    ),
    # -- locks ---------------------------------------------------------------------------------
    "try_lock": "SELECT " + _LOCK + " FROM {s}.try_lock(%(name)s, %(owner)s, %(now)s, %(expires_at)s)",
    "renew_lock": (
        "UPDATE {s}.locks SET expires_at = %(expires_at)s"
        " WHERE name = %(name)s AND token = %(token)s AND expires_at > %(now)s"
        " RETURNING " + _LOCK
    ),
    "release_lock": "DELETE FROM {s}.locks WHERE name = %(name)s AND token = %(token)s",
    # -- schedules -----------------------------------------------------------------------------
    "lock_schedule": "SELECT interval_s, next_boundary FROM {s}.schedules WHERE name = %(name)s FOR UPDATE",
    "insert_schedule": (
        "INSERT INTO {s}.schedules (" + _SCHEDULE + ")"
        " VALUES (%(name)s, %(spec)s, %(interval_s)s, %(queue)s, %(payload)s, %(priority)s, %(max_attempts)s,"
        "         %(expires_us)s, %(next_boundary)s)"
        " ON CONFLICT (name) DO NOTHING"
        " RETURNING " + _SCHEDULE
    ),
    "update_schedule": (
        "UPDATE {s}.schedules SET spec = %(spec)s, interval_s = %(interval_s)s, queue = %(queue)s,"
        " payload = %(payload)s, priority = %(priority)s, max_attempts = %(max_attempts)s,"
        " expires_us = %(expires_us)s, next_boundary = %(next_boundary)s"
        " WHERE name = %(name)s"
        " RETURNING " + _SCHEDULE
    ),
    "unschedule": "DELETE FROM {s}.schedules WHERE name = %(name)s",
    "schedules": "SELECT " + _SCHEDULE + " FROM {s}.schedules ORDER BY name",
    "due_schedules": (
        "SELECT " + _SCHEDULE + " FROM {s}.schedules WHERE next_boundary <= %(now)s ORDER BY name FOR UPDATE"
    ),
    "next_job_ids": "SELECT id FROM {s}.next_job_ids(%(count)s) AS id",
    "insert_fires": (
        "INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      schedule, boundary, enqueued_at)"
        " SELECT id, queue, payload, 'pending', priority, run_at, expires_at, max_attempts, schedule, boundary,"
        "        %(now)s"
        " FROM unnest(%(ids)s::bigint[], %(queues)s::text[], %(payloads)s::bytea[], %(priorities)s::integer[],"
        "             %(run_ats)s::timestamptz[], %(expires_ats)s::timestamptz[], %(max_attempts)s::integer[],"
        "             %(schedules)s::text[], %(boundaries)s::timestamptz[])"
        " AS fire(id, queue, payload, priority, run_at, expires_at, max_attempts, schedule, boundary)"
    ),
    "advance_schedules": (
        "UPDATE {s}.schedules AS s SET next_boundary = a.next_boundary"
        " FROM unnest(%(names)s::text[], %(boundaries)s::timestamptz[]) AS a(name, next_boundary)"
        " WHERE s.name = a.name"
    ),
    "notify_queues": "SELECT pg_notify({s}.channel(%(schema)s, queue), '') FROM unnest(%(queues)s::text[]) AS queue",
    "soonest_boundary": "SELECT min(next_boundary) FROM {s}.schedules",
}


@dataclass(frozen=True, slots=True)
class Statements:
    """The engine's statements for one schema, each ready to execute with bound parameters."""

    version_table_exists: str
    schema_version: str
    migration_lock: str
    create_schema: str
    create_version_table: str
    use_schema: str
    record_version: str
    use_utc: str
    enqueue: str
    channel: str
    claim: str
    listen: str
    unlisten: str
    ack: str
    retry: str
    bury: str
    heartbeat: str
    get_job: str
    requeue_dead: str
    try_lock: str
    renew_lock: str
    release_lock: str
    lock_schedule: str
    insert_schedule: str
    update_schedule: str
    unschedule: str
    schedules: str
    due_schedules: str
    next_job_ids: str
    insert_fires: str
    advance_schedules: str
    notify_queues: str
    soonest_boundary: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """Compose every template with ``schema`` quoted as an identifier."""
        ident = sql.Identifier(schema)
        return cls(**{name: _compose(template, ident) for name, template in _TEMPLATES.items()})


def _compose(template: str, schema: sql.Identifier) -> str:
    # Rendered once to plain text: executing a str is cheaper than re-quoting the identifier,
    # or re-rendering an ``sql.SQL``, on every call, and psycopg encodes a str per connection,
    # so any client encoding works.
    return sql.SQL(template).format(s=schema).as_string()
