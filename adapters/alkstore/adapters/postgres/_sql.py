"""Every SQL statement of the Postgres engine, by name, composed once per schema.

A template names the schema as ``{s}``, filled with ``psycopg.sql.Identifier`` (so any schema
name is quoted correctly, and a ``%`` in it is doubled: every statement runs with bound
parameters, ``%(name)s``, even an empty set of them); values are never formatted into the
text. Functions such as ``{s}.sweep_3`` are created by the migrations; their names carry the
schema version that made them (ADR 014).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

__all__ = ["JOB_COLUMNS", "SCHEDULE_COLUMNS", "UPKEEP_TABLES", "Statements", "grants", "vacuum"]

#: A live job's columns as the engine reads them (``_rows.job_record`` takes them by name).
JOB_COLUMNS = (
    "id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts, last_error, "
    "last_traceback, schedule, boundary, enqueued_at, worker_id, lease_until, lease, visibility_us, task, trace"
)
#: The same for a dead job, as one row shape with live ones.
_DEAD_AS_JOB = (
    "id, queue, payload, 'dead' AS state, priority, run_at, expires_at, attempts, max_attempts, last_error, "
    "last_traceback, schedule, boundary, enqueued_at, NULL::text AS worker_id, NULL::timestamptz AS lease_until, "
    "lease, visibility_us, task, trace"
)
#: The tables whose dead rows a worker's maintenance counts and reclaims (ADR 023): every data table.
UPKEEP_TABLES = ("dead_jobs", "jobs", "locks", "queues", "schedules", "workers")
#: A schedule's columns as the engine reads them.
SCHEDULE_COLUMNS = (
    "name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary, last_boundary"
)
_LOCK = "name, owner, token, expires_at"
_CONFIG = "visibility_us, max_attempts, backoff_base_us, backoff_cap_us, priority"
#: A new job's state: a job due at its enqueue is ready ('pending'); one still ahead is 'delayed'.
_STATE_AT = "CASE WHEN {run_at} > %(now)s THEN 'delayed' ELSE 'pending' END"

#: The claim's sweep: the queue's lapsed leases and expired or due-delayed jobs, in one function call.
_SWEEP_CALL = " SELECT {s}.sweep_3(%(queue)s, %(now)s, %(lease_expired_error)s, %(job_expired_error)s) FROM sweep"

#: The claim's look for a lapsed lease in the queue: the left end of jobs_lease, up to ``now``.
_LEASE_PROBE = (
    "SELECT lease_until FROM {s}.jobs"
    " WHERE queue = %(queue)s AND state = 'running' AND lease_until <= %(now)s"
    " ORDER BY lease_until LIMIT 1"
)

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
    # -- sessions ------------------------------------------------------------------------------
    "use_utc": "SET TIME ZONE 'UTC'",
    "server_time": "SELECT clock_timestamp() AS now",
    # -- queue configuration -------------------------------------------------------------------
    "queue_config": "SELECT " + _CONFIG + " FROM {s}.queues WHERE name = %(queue)s",
    "queue_configs": "SELECT name, " + _CONFIG + " FROM {s}.queues WHERE name = ANY(%(queues)s)",
    "configure_queue": (
        "INSERT INTO {s}.queues (name, " + _CONFIG + ")"
        " VALUES (%(queue)s, %(visibility_us)s, %(max_attempts)s, %(backoff_base_us)s, %(backoff_cap_us)s,"
        "         %(priority)s)"
        " ON CONFLICT (name) DO UPDATE SET visibility_us = excluded.visibility_us,"
        "  max_attempts = excluded.max_attempts, backoff_base_us = excluded.backoff_base_us,"
        "  backoff_cap_us = excluded.backoff_cap_us, priority = excluded.priority"
        " RETURNING name"
    ),
    "unconfigure_queue": "DELETE FROM {s}.queues WHERE name = %(queue)s RETURNING name",
    # -- jobs ----------------------------------------------------------------------------------
    "enqueue_one": (
        "WITH new AS ("
        " INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      visibility_us, task, trace, enqueued_at)"
        " VALUES (%(queue)s, %(payload)s, " + _STATE_AT.format(run_at="%(run_at)s::timestamptz") + ", %(priority)s,"
        "         %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s, %(now)s)"
        " RETURNING id)"
        " SELECT id, pg_notify(%(channel)s, '') FROM new"
    ),
    # A batch whose jobs differ only in their payloads (one enqueue_many call): one array, the rest scalars.
    "enqueue_alike": (
        "WITH new AS ("
        " INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      visibility_us, task, trace, enqueued_at)"
        " SELECT %(queue)s, payload, " + _STATE_AT.format(run_at="%(run_at)s::timestamptz") + ", %(priority)s,"
        "        %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s, %(now)s"
        " FROM unnest(%(payloads)b::bytea[]) AS new(payload)"
        " RETURNING id)"
        " SELECT id FROM new"
        " UNION ALL"
        " SELECT NULL FROM (SELECT pg_notify(%(channel)s, '')) AS notified"
    ),
    "enqueue_many": (
        "WITH new AS ("
        " INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      visibility_us, task, trace, enqueued_at)"
        " SELECT queue, payload, " + _STATE_AT.format(run_at="run_at") + ", priority, run_at, expires_at,"
        "        max_attempts, visibility_us, task, trace, %(now)s"
        " FROM unnest(%(queues)s::text[], %(payloads)b::bytea[], %(priorities)s::integer[],"
        "             %(run_ats)s::timestamptz[], %(expires_ats)s::timestamptz[], %(max_attempts)s::integer[],"
        "             %(visibility_us)s::bigint[], %(tasks)s::text[], %(traces)s::text[])"
        "   AS new(queue, payload, priority, run_at, expires_at, max_attempts, visibility_us, task, trace)"
        " RETURNING id, queue)"
        " SELECT id FROM new"
        " UNION ALL"
        " SELECT NULL FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')"
        "                    FROM (SELECT DISTINCT queue FROM new) AS queues) AS notified"
    ),
    "channel": "SELECT {s}.channel(%(schema)s, %(queue)s) AS channel",
    # The claim, in one statement: a look for anything to sweep in the queue (each probe a range
    # scan of a partial index that stops at the first hit), then the best ready jobs. Most claims
    # find nothing to sweep and lease the jobs here. Otherwise the statement runs the sweep and
    # leases nothing (its snapshot cannot see what the sweep did), and the engine runs it again
    # without the probe.
    "claim": (
        "WITH sweep AS MATERIALIZED ("
        " SELECT %(probe)s AND ("
        "   (" + _LEASE_PROBE + ") IS NOT NULL"
        "   OR (SELECT expires_at FROM {s}.jobs"
        "     WHERE queue = %(queue)s AND state IN ('pending', 'delayed') AND expires_at <= %(now)s"
        "     ORDER BY expires_at LIMIT 1) IS NOT NULL"
        "   OR (SELECT run_at FROM {s}.jobs"
        "     WHERE queue = %(queue)s AND state = 'delayed' AND run_at <= %(now)s"
        "     ORDER BY run_at LIMIT 1) IS NOT NULL) AS needed),"
        " swept AS MATERIALIZED (" + _SWEEP_CALL + " WHERE needed),"
        " claimed AS ("
        " UPDATE {s}.jobs SET state = 'running', attempts = attempts + 1, lease = lease + 1,"
        "                     worker_id = %(worker)s,"
        "                     lease_until = %(now)s + coalesce(visibility_us, %(lease_us)s) * interval '1 microsecond'"
        " WHERE id = ANY(ARRAY("
        "  SELECT id FROM {s}.jobs"
        "   WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s"
        "     AND (expires_at IS NULL OR expires_at > %(now)s)"
        "     AND NOT (SELECT needed FROM sweep)"
        "   ORDER BY priority DESC, run_at, id"
        "   LIMIT %(limit)s"
        "   FOR UPDATE SKIP LOCKED))"
        " RETURNING " + JOB_COLUMNS + ")"
        " SELECT " + JOB_COLUMNS + ", false AS swept FROM claimed"
        " UNION ALL"
        " SELECT " + ", ".join(f"NULL AS {name.strip()}" for name in JOB_COLUMNS.split(",")) + ", true FROM swept"
    ),
    # The claim's lease probe alone, as the claim runs it (for inspecting its cost).
    "lease_probe": _LEASE_PROBE,
    "listen": "SELECT {s}.listen(%(schema)s, %(queue)s)",
    # ack_and_claim is composed below from the claim: the acks first, as one more CTE.
    "unlisten": "UNLISTEN *",
    # The fenced calls return a row for each job whose fence still held (and which they changed).
    "ack_one": "DELETE FROM {s}.jobs WHERE id = %(id)s AND state = 'running' AND lease = %(fence)s RETURNING id",
    "ack_many": (
        "DELETE FROM {s}.jobs AS j USING unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)"
        " WHERE j.id = h.id AND j.state = 'running' AND j.lease = h.fence"
        " RETURNING j.id"
    ),
    "retry": (
        "WITH job AS ("
        " UPDATE {s}.jobs AS j SET state = " + _STATE_AT.format(run_at="r.run_at") + ", run_at = r.run_at,"
        "        last_error = r.error, last_traceback = r.traceback, worker_id = NULL, lease_until = NULL"
        " FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(run_ats)s::timestamptz[], %(errors)b::bytea[],"
        "             %(tracebacks)b::bytea[]) AS r(id, fence, run_at, error, traceback)"
        " WHERE j.id = r.id AND j.state = 'running' AND j.lease = r.fence"
        " RETURNING j.id, j.queue)"
        " SELECT id FROM job"
        " UNION ALL"
        " SELECT NULL FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')"
        "                    FROM (SELECT DISTINCT queue FROM job) AS queues) AS notified"
    ),
    "bury": (
        "SELECT id FROM {s}.bury_3(%(ids)s, %(fences)s, %(errors)b::bytea[], %(tracebacks)b::bytea[], %(now)s) AS id"
    ),
    "release": (
        "WITH job AS ("
        " UPDATE {s}.jobs AS j SET state = " + _STATE_AT.format(run_at="j.run_at") + ","
        "        attempts = greatest(j.attempts - 1, 0), worker_id = NULL, lease_until = NULL"
        " FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)"
        " WHERE j.id = h.id AND j.state = 'running' AND j.lease = h.fence"
        " RETURNING j.id, j.queue)"
        " SELECT id FROM job"
        " UNION ALL"
        " SELECT NULL FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')"
        "                    FROM (SELECT DISTINCT queue FROM job) AS queues) AS notified"
    ),
    "heartbeat": (
        "UPDATE {s}.jobs AS j SET lease_until = b.lease_until"
        " FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(lease_untils)s::timestamptz[])"
        "   AS b(id, fence, lease_until)"
        " WHERE j.id = b.id AND j.state = 'running' AND j.lease = b.fence"
        " RETURNING j.id"
    ),
    "get_job": (
        "SELECT " + JOB_COLUMNS + ", NULL::timestamptz AS died_at FROM {s}.jobs WHERE id = %(id)s"
        " UNION ALL"
        " SELECT " + _DEAD_AS_JOB + ", died_at FROM {s}.dead_jobs WHERE id = %(id)s"
    ),
    "requeue_dead": (
        "WITH dead AS (DELETE FROM {s}.dead_jobs WHERE id = ANY(%(ids)s::bigint[]) RETURNING *),"
        " job AS ("
        " INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,"
        "                      last_error, last_traceback, schedule, boundary, enqueued_at, lease, visibility_us,"
        "                      task, trace)"
        " SELECT id, queue, payload, 'pending', priority, %(now)s, NULL, 0, max_attempts,"
        "        last_error, last_traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace"
        " FROM dead"
        " RETURNING id, queue)"
        " SELECT id FROM job"
        " UNION ALL"
        " SELECT NULL FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')"
        "                    FROM (SELECT DISTINCT queue FROM job) AS queues) AS notified"
    ),
    # -- locks ---------------------------------------------------------------------------------
    "try_lock": "SELECT " + _LOCK + " FROM {s}.try_lock(%(name)s, %(owner)s, %(now)s, %(expires_at)s)",
    "renew_lock": (
        "UPDATE {s}.locks SET expires_at = %(expires_at)s"
        " WHERE name = %(name)s AND token = %(token)s AND expires_at > %(now)s"
        " RETURNING " + _LOCK
    ),
    "release_lock": "DELETE FROM {s}.locks WHERE name = %(name)s AND token = %(token)s RETURNING name",
    # -- schedules -----------------------------------------------------------------------------
    "lock_schedules": (
        "SELECT name, interval_s, next_boundary FROM {s}.schedules WHERE name = ANY(%(names)s) ORDER BY name FOR UPDATE"
    ),
    "insert_schedules": (
        "INSERT INTO {s}.schedules (" + SCHEDULE_COLUMNS + ")"
        " SELECT name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary,"
        "        NULL"
        " FROM unnest(%(names)s::text[], %(specs)s::text[], %(intervals)s::integer[], %(queues)s::text[],"
        "             %(payloads)b::bytea[], %(priorities)s::integer[], %(max_attempts)s::integer[],"
        "             %(expires_us)s::bigint[], %(tasks)s::text[], %(boundaries)s::timestamptz[])"
        "   AS new(name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary)"
        " ON CONFLICT (name) DO NOTHING"
        " RETURNING " + SCHEDULE_COLUMNS
    ),
    "update_schedules": (
        "UPDATE {s}.schedules AS s SET spec = u.spec, interval_s = u.interval_s, queue = u.queue,"
        " payload = u.payload, priority = u.priority, max_attempts = u.max_attempts, expires_us = u.expires_us,"
        " task = u.task, next_boundary = u.next_boundary"
        " FROM unnest(%(names)s::text[], %(specs)s::text[], %(intervals)s::integer[], %(queues)s::text[],"
        "             %(payloads)b::bytea[], %(priorities)s::integer[], %(max_attempts)s::integer[],"
        "             %(expires_us)s::bigint[], %(tasks)s::text[], %(boundaries)s::timestamptz[])"
        "   AS u(name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary)"
        " WHERE s.name = u.name"
        " RETURNING " + ", ".join(f"s.{name.strip()}" for name in SCHEDULE_COLUMNS.split(","))
    ),
    "unschedule": "DELETE FROM {s}.schedules WHERE name = %(name)s RETURNING name",
    "schedules": "SELECT " + SCHEDULE_COLUMNS + " FROM {s}.schedules ORDER BY name",
    # The tick's due schedules, in the planner's order (alkstore._tick.plan_key), locked; the
    # payload stays in the database: only its size is read.
    "due_schedules": (
        "SELECT name, interval_s, queue, priority, max_attempts, expires_us, next_boundary,"
        "       octet_length(payload) AS payload_size"
        " FROM {s}.schedules WHERE next_boundary <= %(now)s"
        " ORDER BY octet_length(payload), next_boundary, name"
        " LIMIT %(limit)s"
        " FOR UPDATE"
    ),
    "next_job_ids": "SELECT id FROM {s}.next_job_ids(%(count)s) AS id",
    # Fires copy their schedule's payload and task inside the database.
    "insert_fires": (
        "INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, max_attempts,"
        "                      schedule, boundary, enqueued_at, task)"
        " SELECT f.id, f.queue, s.payload, 'pending', f.priority, f.run_at, f.expires_at, f.max_attempts,"
        "        f.schedule, f.boundary, %(now)s, s.task"
        " FROM unnest(%(ids)s::bigint[], %(schedules)s::text[], %(boundaries)s::timestamptz[], %(queues)s::text[],"
        "             %(priorities)s::integer[], %(run_ats)s::timestamptz[], %(expires_ats)s::timestamptz[],"
        "             %(max_attempts)s::integer[])"
        "   AS f(id, schedule, boundary, queue, priority, run_at, expires_at, max_attempts)"
        " JOIN {s}.schedules AS s ON s.name = f.schedule"
    ),
    "advance_schedules": (
        "UPDATE {s}.schedules AS s SET next_boundary = a.next_boundary,"
        "       last_boundary = coalesce(a.last_boundary, s.last_boundary)"
        " FROM unnest(%(names)s::text[], %(boundaries)s::timestamptz[], %(lasts)s::timestamptz[])"
        "   AS a(name, next_boundary, last_boundary)"
        " WHERE s.name = a.name"
    ),
    "notify_queues": ("SELECT pg_notify({s}.channel(%(schema)s, queue), '') FROM unnest(%(queues)s::text[]) AS queue"),
    "soonest_boundary": "SELECT min(next_boundary) AS soonest FROM {s}.schedules",
    # -- application roles (ADR 019) -----------------------------------------------------------
    # The roles that may write the jobs table, its owner aside: the schema's application roles,
    # whose grants every migration renews (the catalog remembers them; no table of alkstore's).
    "application_roles": (
        "SELECT r.rolname FROM pg_catalog.pg_class AS c"
        " CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a"
        " JOIN pg_catalog.pg_roles AS r ON r.oid = a.grantee"
        " WHERE c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident(%(schema)s) || '.jobs')"
        "   AND a.privilege_type = 'INSERT' AND a.grantee <> c.relowner"
        " ORDER BY r.rolname"
    ),
    # The tables an application role reads and writes: every table of the schema but its version.
    "data_tables": (
        "SELECT c.relname FROM pg_catalog.pg_class AS c"
        " JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_version'"
        " ORDER BY c.relname"
    ),
}

#: What an application role needs on the schema, granted by ``migrate`` (ADR 019): to use the
#: schema, read and write its tables (read only the version table), draw from its sequences and
#: run its functions. ``{role}`` and ``{tables}`` are identifiers, composed per call.
_GRANTS = (
    "GRANT USAGE ON SCHEMA {s} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {tables} TO {role}",
    "GRANT SELECT ON TABLE {s}.schema_version TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {role}",
    "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {role}",
)


#: A claim that first acks what a worker finished (fenced), in the same statement and round trip: the
#: acked ids come back as rows of their own (``acked``), the claimed jobs and the sweep marker as in
#: ``claim``. The acked rows are running, the claimed ones pending: the two never touch one row. An
#: acked job may have lapsed, so the sweep joins the finished ``acked`` before it calls the sweep
#: function: that function's own statements then see those rows gone, and no row is changed twice.
_TEMPLATES["ack_and_claim"] = (
    "WITH acked AS ("
    " DELETE FROM {s}.jobs AS j USING unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)"
    " WHERE j.id = h.id AND j.state = 'running' AND j.lease = h.fence"
    " RETURNING j.id),"
    + _TEMPLATES["claim"]
    .removeprefix("WITH")
    .replace(_SWEEP_CALL, _SWEEP_CALL + ", (SELECT count(*) FROM acked) AS finished")
    .replace(", false AS swept FROM claimed", ", false AS swept, NULL::bigint AS acked FROM claimed")
    .replace(", true FROM swept", ", true, NULL FROM swept")
    + " UNION ALL"
    " SELECT " + ", ".join(f"NULL AS {name.strip()}" for name in JOB_COLUMNS.split(",")) + ", false, id FROM acked"
)


# -- inspection and actions (ADR 020) ---------------------------------------------------------
# Reads go through the partial index of each stored state (jobs_claim, jobs_delayed, jobs_lease)
# and dead_jobs_queue, each led by the queue, so they add nothing to the per-job paths. A
# 'delayed' row may already be due (a claim's sweep promotes it), and a 'pending' one may be
# ahead of an earlier now: both stored states are read, split by run_at.


_READY_ORDER = " ORDER BY priority DESC, run_at, id LIMIT %(limit)s"
_DELAYED_ORDER = " ORDER BY run_at, id LIMIT %(limit)s"
_LIVE_PAGE = "SELECT " + JOB_COLUMNS + ", NULL::timestamptz AS died_at FROM ("
_AFTER_READY = "(run_at, id) > (%(at)s::timestamptz, %(id)s::bigint)"
_OF_QUEUE = "SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND "
_WORKER = "id, host, pid, queues, concurrency, started_at, seen_at, running, processed, failed"

_TEMPLATES.update(
    {
        # Per queue, capped counts from the functions of version 4 (each a few index probes and
        # at most the cap of index entries per phase); the queue list is a loose index scan.
        "queue_counts": (
            "SELECT q AS queue, c.* FROM {s}.queues_4() AS q,"
            ' LATERAL {s}.queue_counts_4(q, %(now)s, %(cap)s) AS c ORDER BY q COLLATE "C"'
        ),
        "queue_counts_one": (
            "SELECT %(queue)s::text AS queue, c.* FROM {s}.queue_counts_4(%(queue)s, %(now)s, %(cap)s) AS c"
        ),
        # Ready jobs in claim order after (priority, run_at, id): the rest of the key's priority
        # and the lower priorities, each a range of jobs_claim, then the due 'delayed' rows.
        "list_ready": (
            _LIVE_PAGE + "(" + _OF_QUEUE + "state = 'pending' AND run_at <= %(now)s AND priority = %(priority)s::bigint"
            " AND " + _AFTER_READY + _READY_ORDER + ")"
            " UNION ALL (" + _OF_QUEUE + "state = 'pending' AND run_at <= %(now)s"
            " AND priority < %(priority)s::bigint" + _READY_ORDER + ")"
            " UNION ALL (" + _OF_QUEUE + "state = 'delayed' AND run_at <= %(now)s"
            " AND (priority < %(priority)s::bigint OR (priority = %(priority)s::bigint AND "
            + _AFTER_READY
            + "))"
            + _READY_ORDER
            + ")) AS page"
            + _READY_ORDER
        ),
        "list_delayed": (
            _LIVE_PAGE
            + "("
            + _OF_QUEUE
            + "state = 'delayed' AND run_at > %(now)s AND "
            + _AFTER_READY
            + _DELAYED_ORDER
            + ")"
            " UNION ALL ("
            + _OF_QUEUE
            + "state = 'pending' AND run_at > %(now)s AND "
            + _AFTER_READY
            + _DELAYED_ORDER
            + ")) AS page"
            + _DELAYED_ORDER
        ),
        "list_running": (
            "SELECT " + JOB_COLUMNS + ", NULL::timestamptz AS died_at FROM {s}.jobs"
            " WHERE queue = %(queue)s AND state = 'running' AND id > %(id)s::bigint ORDER BY id LIMIT %(limit)s"
        ),
        "list_dead": (
            "SELECT " + _DEAD_AS_JOB + ", died_at FROM {s}.dead_jobs"
            " WHERE queue = %(queue)s AND (died_at, id) < (%(at)s::timestamptz, %(id)s::bigint)"
            " ORDER BY died_at DESC, id DESC LIMIT %(limit)s"
        ),
        "read_lock": "SELECT " + _LOCK + " FROM {s}.locks WHERE name = %(name)s",
        "cancel": (
            "DELETE FROM {s}.jobs WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('pending', 'delayed') RETURNING id"
        ),
        "purge_dead": (
            "WITH gone AS (DELETE FROM {s}.dead_jobs WHERE id IN ("
            " SELECT id FROM {s}.dead_jobs WHERE queue = %(queue)s AND died_at <= %(before)s"
            " ORDER BY died_at LIMIT %(limit)s) RETURNING 1)"
            " SELECT count(*) FROM gone"
        ),
        "record_worker": (
            "INSERT INTO {s}.workers (" + _WORKER + ")"
            " VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::text[], %(concurrency)s, %(started_at)s, %(seen_at)s,"
            "         %(running)s, %(processed)s, %(failed)s)"
            " ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,"
            "  concurrency = excluded.concurrency, started_at = excluded.started_at, seen_at = excluded.seen_at,"
            "  running = excluded.running, processed = excluded.processed, failed = excluded.failed"
            " RETURNING id"
        ),
        "remove_worker": "DELETE FROM {s}.workers WHERE id = %(id)s RETURNING id",
        "workers": "SELECT " + _WORKER + " FROM {s}.workers WHERE seen_at >= %(since)s ORDER BY id",
        "forget_workers": (
            "WITH gone AS (DELETE FROM {s}.workers WHERE seen_at < %(before)s RETURNING 1) SELECT count(*) FROM gone"
        ),
        # -- storage upkeep (ADR 023) --------------------------------------------------------
        # The schema's tables with the server's estimates of their rows, whether autovacuum
        # covers them, and whether this role may VACUUM them (PostgreSQL 15: the table's owner,
        # the database's owner or a superuser; the privileges of a role's roles count). Each
        # table is found by its name (an index probe of pg_class) and counted by the statistics
        # functions: the pg_stat views and a scan of pg_class read every table of the database,
        # which costs a catalog's worth of pages where many schemas come and go.
        "table_stats": (
            "SELECT t.name AS table, pg_catalog.pg_stat_get_live_tuples(c.oid) AS live_rows,"
            "       pg_catalog.pg_stat_get_dead_tuples(c.oid) AS dead_rows,"
            "       pg_catalog.current_setting('autovacuum')::boolean"
            "       AND coalesce((SELECT o.option_value::boolean FROM pg_catalog.pg_options_to_table(c.reloptions) AS o"
            "                      WHERE o.option_name = 'autovacuum_enabled'), true) AS autovacuum,"
            "       pg_catalog.pg_has_role(c.relowner, 'USAGE')"
            "       OR pg_catalog.pg_has_role((SELECT d.datdba FROM pg_catalog.pg_database AS d"
            "                                  WHERE d.datname = pg_catalog.current_database()), 'USAGE')"
            "       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) AS vacuumable"
            " FROM unnest(%(tables)s::text[]) AS t(name)"
            " JOIN pg_catalog.pg_class AS c ON c.oid = pg_catalog.to_regclass("
            "   pg_catalog.quote_ident(%(schema)s) || '.' || pg_catalog.quote_ident(t.name))"
            ' ORDER BY t.name COLLATE "C"'
        ),
    }
)


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
    server_time: str
    queue_config: str
    queue_configs: str
    configure_queue: str
    unconfigure_queue: str
    enqueue_one: str
    enqueue_alike: str
    enqueue_many: str
    channel: str
    claim: str
    ack_and_claim: str
    lease_probe: str
    listen: str
    unlisten: str
    ack_one: str
    ack_many: str
    retry: str
    bury: str
    release: str
    heartbeat: str
    get_job: str
    requeue_dead: str
    try_lock: str
    renew_lock: str
    release_lock: str
    lock_schedules: str
    insert_schedules: str
    update_schedules: str
    unschedule: str
    schedules: str
    due_schedules: str
    next_job_ids: str
    insert_fires: str
    advance_schedules: str
    notify_queues: str
    soonest_boundary: str
    application_roles: str
    data_tables: str
    # -- inspection and actions
    queue_counts: str
    queue_counts_one: str
    list_ready: str
    list_delayed: str
    list_running: str
    list_dead: str
    read_lock: str
    cancel: str
    purge_dead: str
    record_worker: str
    remove_worker: str
    workers: str
    forget_workers: str
    table_stats: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """Compose every template with ``schema`` quoted as an identifier (its ``%`` doubled)."""
        ident = _identifier(schema)
        return cls(**{name: _compose(template, ident) for name, template in _TEMPLATES.items()})


def grants(schema: str, role: str, tables: Sequence[str]) -> list[str]:
    """The statements that give ``role`` what an application role needs on ``schema`` and its ``tables``."""
    names = {
        "s": _identifier(schema),
        "role": _identifier(role),
        "tables": sql.SQL(", ").join(sql.SQL("{}.{}").format(_identifier(schema), _identifier(t)) for t in tables),
    }
    wanted = [template for template in _GRANTS if tables or "{tables}" not in template]
    return [sql.SQL(template).format(**names).as_string() for template in wanted]


def vacuum(schema: str, table: str) -> str:
    """``VACUUM`` of one table of ``schema`` (ADR 023): never waiting for a lock another vacuum
    holds, and always cleaning the indexes (the claim reads their dead entries)."""
    return (
        sql.SQL("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {s}.{table}")
        .format(s=_identifier(schema), table=_identifier(table))
        .as_string()
    )


def _identifier(name: str) -> sql.SQL:
    """``name`` quoted as an identifier, its ``%`` doubled (the statement runs with bound parameters)."""
    return sql.SQL(sql.Identifier(name).as_string().replace("%", "%%"))


def _compose(template: str, schema: sql.Composable) -> str:
    # Rendered once to plain text: executing a str is cheaper than re-quoting the identifier,
    # or re-rendering an ``sql.SQL``, on every call, and psycopg encodes a str per connection,
    # so any client encoding works.
    return sql.SQL(template).format(s=schema).as_string()
