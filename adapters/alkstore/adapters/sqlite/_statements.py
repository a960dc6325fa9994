"""Every SQL statement of the SQLite engine: the one place they live (its migrations: ``_migrations``).

Parameters are always bound (``?``); no statement is formatted from a value. Instants are stored as
integer microseconds since the Unix epoch (UTC), durations as integer microseconds, so that every
order and comparison is an integer's, exact at the port's resolution.
"""

from __future__ import annotations

__all__ = ["CLAIMED_COLUMNS", "JOB_COLUMNS", "MIGRATIONS", "RESULT_COLUMNS", "SCHEDULE_COLUMNS", "WORKER_COLUMNS"]

from ._migrations import MIGRATIONS

# -- schema version ------------------------------------------------------------------------------

CREATE_VERSION = "CREATE TABLE IF NOT EXISTS alkstore_schema (version INTEGER NOT NULL)"
HAS_VERSION = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alkstore_schema'"
READ_VERSION = "SELECT max(version) FROM alkstore_schema"
WRITE_VERSION = "INSERT INTO alkstore_schema (version) VALUES (?)"

# -- connection ------------------------------------------------------------------------------------

BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
BEGIN = "BEGIN"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
JOURNAL_WAL = "PRAGMA journal_mode = WAL"
JOURNAL_MODE = "PRAGMA journal_mode"
#: ``synchronous`` takes no parameter: one statement per level the engine allows.
SYNCHRONOUS = {"normal": "PRAGMA synchronous = NORMAL", "full": "PRAGMA synchronous = FULL"}
FOREIGN_KEYS_OFF = "PRAGMA foreign_keys = OFF"
DATA_VERSION = "PRAGMA data_version"
QUICK_CHECK = "PRAGMA quick_check"
DATABASE_LIST = "PRAGMA database_list"

# -- counters --------------------------------------------------------------------------------------

NEXT_COUNTER = "UPDATE alkstore_counters SET value = value + ? WHERE name = ? RETURNING value"

# -- queue configuration ---------------------------------------------------------------------------

QUEUE_CONFIG = (
    "SELECT visibility, max_attempts, backoff_base, backoff_cap, priority, concurrency, keep_results, paused,"
    " rate_count, rate_per, key_rate_count, key_rate_per FROM alkstore_queues WHERE queue = ?"
)
STORE_QUEUE_CONFIG = (
    "INSERT OR REPLACE INTO alkstore_queues"
    " (queue, visibility, max_attempts, backoff_base, backoff_cap, priority, concurrency, keep_results, paused,"
    " rate_count, rate_per, key_rate_count, key_rate_per) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_QUEUE_CONFIG = "DELETE FROM alkstore_queues WHERE queue = ?"
PAUSED_QUEUES = "SELECT queue FROM alkstore_queues WHERE paused = 1"

# -- jobs ------------------------------------------------------------------------------------------

JOB_COLUMNS = (
    "id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts, last_error, schedule,"
    " boundary, enqueued_at, worker_id, lease_until, died_at, fence, visibility, task, last_traceback, trace,"
    " unique_key, unique_running, ordering_key, waiting, cancel_requested, claimed_at, rate_key, dependents"
)

#: Dependencies (ADR 073; ``_dependencies``).
PARENT_STATE = "SELECT state FROM alkstore_jobs WHERE id = ?"
COUNT_DEPENDENT = "UPDATE alkstore_jobs SET dependents = dependents + 1 WHERE id = ?"
KEPT_RESULT = "SELECT result FROM alkstore_results WHERE id = ?"
SET_PARENTS = "UPDATE alkstore_jobs SET on_parent_failure = ? WHERE id = ?"
LINK_PARENT = "INSERT INTO alkstore_job_dependencies (child, parent, position, state, result) VALUES (?, ?, ?, ?, ?)"
WAITING_LINKS = "SELECT count(*) FROM alkstore_job_dependencies WHERE child = ? AND state = 'waiting'"
SET_WAITING = "UPDATE alkstore_jobs SET waiting = ? WHERE id = ? AND state = 'pending'"
SETTLE_LINKS = (
    "UPDATE alkstore_job_dependencies SET state = ?, result = ? WHERE parent = ? AND state = 'waiting' RETURNING child"
)
LIVE_DEPENDENT = "SELECT on_parent_failure FROM alkstore_jobs WHERE id = ? AND state = 'pending'"
DEPENDENT_ROW = f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE id = ?"
PARENT_LINKS = "SELECT parent, state, result FROM alkstore_job_dependencies WHERE child = ? ORDER BY position"
#: A requeued dependent linked again to its parents as they are then (ADR 077).
RELINK_PARENT = "UPDATE alkstore_job_dependencies SET state = ?, result = ? WHERE child = ? AND parent = ?"
WAITING_CHILDREN = (
    "SELECT d.child FROM alkstore_job_dependencies AS d JOIN alkstore_jobs AS j ON j.id = d.child"
    " WHERE d.parent = ? AND d.state = 'waiting' AND j.state = 'pending' ORDER BY d.child"
)
INSERT_JOB = (
    "INSERT INTO alkstore_jobs (id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,"
    " schedule, boundary, enqueued_at, fence, visibility, task, trace, unique_key, unique_running, ordering_key,"
    " waiting, line, rate_key) VALUES (?, ?, ?, 'pending', ?, ?, ?, 0, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: A job with no unique or ordering key, not a schedule's: fewer values to bind, no place in a line (``line`` 0).
INSERT_PLAIN_JOB = (
    "INSERT INTO alkstore_jobs (id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,"
    " enqueued_at, fence, visibility, task, trace, unique_running) VALUES (?, ?, ?, 'pending', ?, ?, ?, 0, ?, ?, 0,"
    " ?, ?, ?, ?)"
)
#: ``INSERT_PLAIN_JOB`` of jobs with no expiry, visibility, task or trace (most plain ones): those columns left NULL
#: by the table, not bound (each bound ``None`` is an adapter lookup of the ``sqlite3`` module, ``_rows``).
INSERT_BARE_JOB = (
    "INSERT INTO alkstore_jobs (id, queue, payload, state, priority, run_at, attempts, max_attempts, enqueued_at,"
    " fence, unique_running) VALUES (?, ?, ?, 'pending', ?, ?, 0, ?, ?, 0, ?)"
)
UNIQUE_HOLDER = "SELECT id FROM alkstore_jobs WHERE queue = ? AND unique_key = ?"
LINE_BUSY = (
    "SELECT 1 FROM alkstore_jobs WHERE queue = ? AND ordering_key = ? AND state IN ('pending', 'running') LIMIT 1"
)
NEXT_IN_LINE = (
    "SELECT id FROM alkstore_jobs WHERE queue = ? AND ordering_key = ? AND state = 'pending' AND waiting = 1"
    " ORDER BY line LIMIT 1"
)
END_WAIT = "UPDATE alkstore_jobs SET waiting = 0 WHERE id = ?"
#: With the job's attempt log (its queue keeps results), which a dead job keeps too (ADR 064).
GET_JOB = f"SELECT {JOB_COLUMNS}, attempt_log FROM alkstore_jobs WHERE id = ?"
HELD_JOB = f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE id = ? AND state = 'running' AND fence = ?"
LAPSED_LEASES = (
    f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE queue = ? AND state = 'running' AND lease_until <= ?"
    " ORDER BY lease_until, id"
)
EXPIRED_PENDING = (
    f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE queue = ? AND state = 'pending' AND expires_at <= ?"
    " ORDER BY expires_at, id"
)
#: A rate-limited queue's claim (ADR 070) reads its ready jobs in claim order and takes them one by one.
CLAIMABLE = (
    f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE queue = ? AND state = 'pending' AND waiting = 0"
    " AND run_at <= ? ORDER BY priority DESC, run_at, id LIMIT ?"
)
# -- rate limits (ADR 070) -------------------------------------------------------------------------
NEXT_START = "SELECT next_at FROM alkstore_rate_starts WHERE queue = ? AND key = ?"
STORE_NEXT_START = "INSERT OR REPLACE INTO alkstore_rate_starts (queue, key, next_at) VALUES (?, ?, ?)"
SOONEST_LEASE = "SELECT min(lease_until) FROM alkstore_jobs WHERE queue = ? AND state = 'running'"
READY_RUN_ATS = "SELECT run_at, rate_key FROM alkstore_jobs WHERE queue = ? AND state = 'pending' AND waiting = 0"
TAKE_JOB = (
    "UPDATE alkstore_jobs SET state = 'running', attempts = attempts + 1, fence = fence + 1, worker_id = ?,"
    " lease_until = ?, claimed_at = ?, unique_key = CASE WHEN unique_running = 1 THEN unique_key END WHERE id = ?"
)
#: Whether a claim of the queue has anything to do at ``now``: a due job, a lapsed lease or an expired job.
CLAIM_WORK = (
    "SELECT EXISTS (SELECT 1 FROM alkstore_jobs WHERE queue = ?1 AND state = 'pending' AND waiting = 0"
    " AND run_at <= ?2)"
    " OR EXISTS (SELECT 1 FROM alkstore_jobs WHERE queue = ?1 AND state = 'running' AND lease_until <= ?2)"
    " OR EXISTS (SELECT 1 FROM alkstore_jobs WHERE queue = ?1 AND expires_at <= ?2 AND state = 'pending')"
)


def _sweeps_due(queue: str) -> str:
    """Whether the queue (parameter ``queue``) has a lapsed lease or an expired job at ``?2``."""
    return (
        f"EXISTS (SELECT 1 FROM alkstore_jobs WHERE queue = {queue} AND state = 'running' AND lease_until <= ?2)"
        f" OR EXISTS (SELECT 1 FROM alkstore_jobs WHERE queue = {queue} AND expires_at <= ?2 AND state = 'pending')"
    )


#: Whether a claim must sweep first: a lapsed lease, an expired job (the sweeps' reads find nothing else).
SWEEPS_DUE = f"SELECT {_sweeps_due('?1')}"
#: Take the best ``?5`` due jobs (priority descending, run_at, id) for worker ``?1`` at ``?2``, their lease their
#: own visibility or ``?3``; the jobs as taken (in no order: RETURNING keeps none).
_CLAIM = (
    "UPDATE alkstore_jobs SET state = 'running', attempts = attempts + 1, fence = fence + 1, worker_id = ?1,"
    " lease_until = ?2 + coalesce(visibility, ?3), claimed_at = ?2,"
    " unique_key = CASE WHEN unique_running = 1 THEN unique_key END"
    " WHERE id IN (SELECT id FROM alkstore_jobs WHERE queue = ?4 AND state = 'pending' AND waiting = 0"
    " AND run_at <= ?2 ORDER BY priority DESC, run_at, id LIMIT ?5)"
)
#: What a take returns of each job: the columns whose values the claim does not know already (the queue, the
#: state, the worker, the lease, the claim's instant, no death, not waiting: the claim's own; ``_rows.claimed_of``).
CLAIMED_COLUMNS = (
    "id, payload, priority, run_at, expires_at, attempts, max_attempts, last_error, schedule, boundary, enqueued_at,"
    " fence, visibility, task, last_traceback, trace, unique_key, unique_running, ordering_key, cancel_requested,"
    " rate_key, dependents"
)
CLAIM_JOBS = f"{_CLAIM} RETURNING {CLAIMED_COLUMNS}"
#: ``CLAIM_JOBS``, which takes nothing while the queue has a sweep due (its check and the take one statement).
CLAIM_JOBS_UNSWEPT = f"{_CLAIM} AND NOT ({_sweeps_due('?4')}) RETURNING {CLAIMED_COLUMNS}"
LIVE_LEASES = "SELECT count(*) FROM alkstore_jobs WHERE queue = ? AND state = 'running' AND lease_until > ?"
MAKE_PENDING = "UPDATE alkstore_jobs SET state = 'pending', worker_id = NULL, lease_until = NULL WHERE id = ?"
RETRY_JOB = (
    "UPDATE alkstore_jobs SET state = 'pending', worker_id = NULL, lease_until = NULL, run_at = ?,"
    " last_error = ?, last_traceback = ?, attempt_log = ? WHERE id = ?"
)
RELEASE_JOB = (
    "UPDATE alkstore_jobs SET state = 'pending', worker_id = NULL, lease_until = NULL,"
    " attempts = max(0, attempts - 1) WHERE id = ?"
)
#: A dead job keeps its attempt log, the burial's attempt appended by the engine where it logs one (ADR 064).
BURY_JOB = (
    "UPDATE alkstore_jobs SET state = 'dead', last_error = ?, last_traceback = ?, died_at = ?, worker_id = NULL,"
    " lease_until = NULL, claimed_at = NULL, unique_key = NULL, waiting = 0, attempt_log = ? WHERE id = ?"
)
DELETE_JOB = "DELETE FROM alkstore_jobs WHERE id = ?"
#: An ack: the held job (id and fence) deleted, with what its kept result and its key's line need of it.
ACK_JOB = (
    "DELETE FROM alkstore_jobs WHERE id = ? AND state = 'running' AND fence = ? RETURNING queue, payload, task,"
    " attempts, max_attempts, enqueued_at, worker_id, cancel_requested, ordering_key, waiting, attempt_log, dependents"
)
#: ``ACK_JOB`` of many held jobs at once, their ``(id, fence)`` pairs one JSON array (``_acks``); each row's id first.
ACK_JOBS = (
    "DELETE FROM alkstore_jobs WHERE (id, fence) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')"
    " FROM json_each(?)) AND state = 'running' RETURNING id, queue, payload, task, attempts, max_attempts,"
    " enqueued_at, worker_id, cancel_requested, ordering_key, waiting, attempt_log, dependents"
)
#: An ack that needs nothing of the row (no result to keep, no dependents, no key's line): a plain fenced
#: delete, counted by its changes (``RETURNING`` costs about a read of the row); any other goes ``ACK_JOB``'s way.
ACK_PLAIN_JOB = (
    "DELETE FROM alkstore_jobs WHERE id = ? AND state = 'running' AND fence = ? AND dependents = 0"
    " AND ordering_key IS NULL"
)
HEARTBEAT = "UPDATE alkstore_jobs SET lease_until = ? WHERE id = ?"
REQUEUE_DEAD = (
    "UPDATE alkstore_jobs SET state = 'pending', attempts = 0, run_at = ?, expires_at = NULL, died_at = NULL,"
    " unique_key = NULL, attempt_log = NULL, waiting = ?, line = ? WHERE id = ? AND state = 'dead' RETURNING queue"
)
DEAD_JOB = "SELECT queue, ordering_key FROM alkstore_jobs WHERE id = ? AND state = 'dead'"
PENDING_JOB = f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE id = ? AND state = 'pending'"
REQUEST_CANCEL = "UPDATE alkstore_jobs SET cancel_requested = 1 WHERE id = ? AND state = 'running' RETURNING id"
PURGE_DEAD = (
    "DELETE FROM alkstore_jobs WHERE id IN (SELECT id FROM alkstore_jobs WHERE queue = ? AND state = 'dead'"
    " AND died_at <= ? ORDER BY died_at, id LIMIT ?)"
)
PURGE_DEAD_JOB = "DELETE FROM alkstore_jobs WHERE id = ? AND state = 'dead' RETURNING id"
SOONEST_DUE = (
    "SELECT min(due) FROM (SELECT min(run_at) AS due FROM alkstore_jobs WHERE queue = ?1 AND state = 'pending'"
    " AND waiting = 0 UNION ALL SELECT min(lease_until) FROM alkstore_jobs WHERE queue = ?1 AND state = 'running'"
    " AND waiting = 0)"
)
ATTEMPT_LOG = "SELECT attempt_log FROM alkstore_jobs WHERE id = ?"

# -- inspection --------------------------------------------------------------------------------------

#: Per queue (one or all): ready, delayed, running, dead, waiting and the oldest ready run_at at ``now``.
COUNTS = (
    "SELECT queue,"
    " sum(state = 'pending' AND waiting = 0 AND run_at <= ?1),"
    " sum(state = 'pending' AND waiting = 0 AND run_at > ?1),"
    " sum(state = 'running'),"
    " sum(state = 'dead'),"
    " min(CASE WHEN state = 'pending' AND waiting = 0 AND run_at <= ?1 THEN run_at END),"
    " sum(state = 'pending' AND waiting = 1)"
    " FROM alkstore_jobs WHERE ?2 IS NULL OR queue = ?2 GROUP BY queue"
)
#: Every job of a queue in a state (a listing sorts and pages them through the kit's own orders); the state is
#: written into each statement, so that the read finds the state's own index.
JOBS_IN_STATE = {
    state: f"SELECT {JOB_COLUMNS} FROM alkstore_jobs WHERE queue = ? AND state = '{state}'"
    for state in ("pending", "running", "dead")
}

# -- kept results ------------------------------------------------------------------------------------

RESULT_COLUMNS = (
    "id, queue, payload, task, attempts, max_attempts, enqueued_at, started_at, finished_at, keep_until,"
    " worker_id, result, attempt_log"
)
INSERT_RESULT = (
    f"INSERT OR REPLACE INTO alkstore_results ({RESULT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
GET_RESULT = f"SELECT {RESULT_COLUMNS} FROM alkstore_results WHERE id = ?"
LIST_RESULTS = (
    f"SELECT {RESULT_COLUMNS} FROM alkstore_results WHERE queue = ?1"
    " AND (?2 IS NULL OR finished_at < ?2 OR (finished_at = ?2 AND id < ?3))"
    " ORDER BY finished_at DESC, id DESC LIMIT ?4"
)
PURGE_RESULTS = (
    "DELETE FROM alkstore_results WHERE id IN (SELECT id FROM alkstore_results WHERE (?1 IS NULL OR queue = ?1)"
    " AND keep_until <= ?2 ORDER BY keep_until, id LIMIT ?3)"
)

# -- locks -------------------------------------------------------------------------------------------

READ_LOCK = "SELECT name, owner, token, expires_at FROM alkstore_locks WHERE name = ?"
LIST_LOCKS = (
    "SELECT name, owner, token, expires_at FROM alkstore_locks WHERE expires_at > ? AND (? IS NULL OR name > ?)"
    " ORDER BY name LIMIT ?"
)
STORE_LOCK = "INSERT OR REPLACE INTO alkstore_locks (name, owner, token, expires_at) VALUES (?, ?, ?, ?)"
DELETE_LOCK = "DELETE FROM alkstore_locks WHERE name = ? AND token = ?"

# -- schedules ---------------------------------------------------------------------------------------

SCHEDULE_COLUMNS = (
    "name, spec, interval_s, queue, payload, priority, max_attempts, expires, task, anchor, next_boundary,"
    " last_boundary"
)
GET_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM alkstore_schedules WHERE name = ?"
STORE_SCHEDULE = (
    f"INSERT OR REPLACE INTO alkstore_schedules ({SCHEDULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_SCHEDULE = "DELETE FROM alkstore_schedules WHERE name = ?"
ALL_SCHEDULES = f"SELECT {SCHEDULE_COLUMNS} FROM alkstore_schedules ORDER BY name"
DUE_SCHEDULES = (
    "SELECT name, interval_s, queue, priority, max_attempts, expires, next_boundary, length(payload)"
    " FROM alkstore_schedules WHERE next_boundary <= ? ORDER BY length(payload), next_boundary, name"
)
SCHEDULE_SOURCE = "SELECT payload, task FROM alkstore_schedules WHERE name = ?"
ADVANCE_SCHEDULE = (
    "UPDATE alkstore_schedules SET next_boundary = ?, last_boundary = coalesce(?, last_boundary) WHERE name = ?"
)
SOONEST_BOUNDARY = "SELECT min(next_boundary) FROM alkstore_schedules"

# -- the action log (ADR 068) -----------------------------------------------------------------------

RECORD_ACTION = (
    "INSERT INTO alkstore_action_log (at, role, address, action, target, outcome)"
    " VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
)
LIST_ACTIONS = (
    "SELECT id, at, role, address, action, target, outcome FROM alkstore_action_log"
    " WHERE (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?"
)
PURGE_ACTIONS = (
    "DELETE FROM alkstore_action_log WHERE id IN (SELECT id FROM alkstore_action_log WHERE at < ? ORDER BY id LIMIT ?)"
)

# -- workers and throughput --------------------------------------------------------------------------

WORKER_COLUMNS = "id, host, pid, queues, concurrency, started_at, seen_at, running, processed, failed"
STORE_WORKER = f"INSERT OR REPLACE INTO alkstore_workers ({WORKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
ADD_THROUGHPUT = (
    "INSERT INTO alkstore_throughput (minute, queue, done, failed) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (minute, queue) DO UPDATE SET done = done + excluded.done, failed = failed + excluded.failed"
)
DELETE_WORKER = "DELETE FROM alkstore_workers WHERE id = ?"
WORKERS_SINCE = f"SELECT {WORKER_COLUMNS} FROM alkstore_workers WHERE seen_at >= ? ORDER BY id"
FORGET_WORKERS = "DELETE FROM alkstore_workers WHERE seen_at < ?"
THROUGHPUT_SINCE = (
    "SELECT queue, minute, done, failed FROM alkstore_throughput WHERE minute >= ? ORDER BY minute, queue"
)
PURGE_THROUGHPUT = "DELETE FROM alkstore_throughput WHERE minute < ?"
ADD_TASK_FIGURES = (
    "INSERT INTO alkstore_task_figures (minute, queue, task, done, failed, run_ms, latency_ms)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (minute, queue, task) DO UPDATE SET done = done + excluded.done,"
    " failed = failed + excluded.failed, run_ms = run_ms + excluded.run_ms,"
    " latency_ms = latency_ms + excluded.latency_ms"
)
TASK_FIGURES_SINCE = (
    "SELECT queue, task, minute, done, failed, run_ms, latency_ms FROM alkstore_task_figures"
    " WHERE minute >= ? AND (? IS NULL OR queue = ?) ORDER BY minute, queue, task"
)
#: The minutes (microseconds since the epoch) before a bound that do not start an hour, added into their hour's
#: first minute, then deleted, in one transaction (ADR 075).
_NOT_AN_HOUR = "minute < ? AND minute % 3600000000 <> 0"
ROLL_UP_TASK_FIGURES = (
    "INSERT INTO alkstore_task_figures (minute, queue, task, done, failed, run_ms, latency_ms)"
    " SELECT minute - minute % 3600000000, queue, task, sum(done), sum(failed), sum(run_ms), sum(latency_ms)"
    f" FROM alkstore_task_figures WHERE {_NOT_AN_HOUR} GROUP BY 1, queue, task"
    " ON CONFLICT (minute, queue, task) DO UPDATE SET done = done + excluded.done,"
    " failed = failed + excluded.failed, run_ms = run_ms + excluded.run_ms,"
    " latency_ms = latency_ms + excluded.latency_ms"
)
FOLDED_TASK_FIGURES = f"DELETE FROM alkstore_task_figures WHERE {_NOT_AN_HOUR}"
PURGE_TASK_FIGURES = "DELETE FROM alkstore_task_figures WHERE minute < ?"

# -- steps, waits and events (ADR 069) -------------------------------------------------------------

HELD_FENCE = "SELECT queue FROM alkstore_jobs WHERE id = ? AND state = 'running' AND fence = ?"
STEPS = "SELECT name, result, at FROM alkstore_steps WHERE job_id = ? ORDER BY at, name"
SAVE_STEP = (
    "INSERT INTO alkstore_steps (job_id, name, result, at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (job_id, name) DO UPDATE SET result = excluded.result, at = excluded.at"
)
#: An operator's skipped step (ADR 077): the job's state, then its fence bumped (its next claim reads its steps).
JOB_STATE = "SELECT state FROM alkstore_jobs WHERE id = ?"
BUMP_FENCE = "UPDATE alkstore_jobs SET fence = fence + 1 WHERE id = ?"
WAIT = "SELECT until, event FROM alkstore_waits WHERE job_id = ?"
SAVE_WAIT = (
    "INSERT INTO alkstore_waits (job_id, until, event) VALUES (?, ?, ?)"
    " ON CONFLICT (job_id) DO UPDATE SET until = excluded.until, event = excluded.event"
)
DELETE_WAIT = "DELETE FROM alkstore_waits WHERE job_id = ?"
DELETE_STEPS = "DELETE FROM alkstore_steps WHERE job_id = ?"
#: Jobs with steps or a wait that are stored no more (acked, cancelled, purged): an upkeep pass deletes those.
GONE_STEPS = (
    "SELECT job_id FROM (SELECT job_id FROM alkstore_steps UNION SELECT job_id FROM alkstore_waits)"
    " WHERE job_id NOT IN (SELECT id FROM alkstore_jobs) LIMIT ?"
)
SUSPEND_JOB = (
    "UPDATE alkstore_jobs SET state = 'pending', run_at = ?, worker_id = NULL, lease_until = NULL,"
    " attempts = max(0, attempts - 1) WHERE id = ?"
)
LIVE_EVENT = "SELECT name, payload, at, expires_at FROM alkstore_events WHERE name = ? AND expires_at > ?"
KEEP_EVENT = (
    "INSERT INTO alkstore_events (name, payload, at, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET payload = excluded.payload, at = excluded.at, expires_at = excluded.expires_at"
    " WHERE alkstore_events.expires_at <= excluded.at"
)
PURGE_EVENTS = (
    "DELETE FROM alkstore_events WHERE name IN"
    " (SELECT name FROM alkstore_events WHERE expires_at <= ? AND name <> ? LIMIT 100)"
)
WOKEN = "DELETE FROM alkstore_waits WHERE event = ? RETURNING job_id"
WAKE_JOB = "UPDATE alkstore_jobs SET run_at = min(run_at, ?) WHERE id = ? AND state = 'pending'"
