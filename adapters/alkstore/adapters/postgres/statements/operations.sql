-- Inspection and operators' actions (ADR 020). Reads go through the partial index of each stored
-- state (jobs_claim, jobs_delayed, jobs_lease) and dead_jobs_queue, each led by the queue, so
-- they add nothing to the per-job paths. A 'delayed' row may already be due (a claim's sweep
-- promotes it), and a 'pending' one may be ahead of an earlier now: both stored states are
-- read, split by run_at.
--
-- A listing's order and its keyset condition ("after the key", bound as %(priority)s, %(at)s
-- and %(id)s) are composed from the orders core declares (alkstore.engine.ORDERS): {order_ready}
-- and {after_ready} for the ready phase, and so on; _sql.py says how.

-- -- counts -----------------------------------------------------------------------------------

-- name: queue_counts
-- Per queue, capped counts from the functions of version 6 (each a few index probes and at most
-- the cap of index entries per phase); the queue list is a loose index scan, and the paused queues
-- (an empty one too: the overview shows it paused, to be resumed).
SELECT q AS queue, c.* FROM (SELECT {s}.queues_4() UNION SELECT name FROM {s}.queues WHERE paused) AS listed (q),
LATERAL {s}.queue_counts_6(q, %(now)s, %(cap)s) AS c ORDER BY q COLLATE "C"

-- name: queue_counts_one
SELECT %(queue)s::text AS queue, c.* FROM {s}.queue_counts_6(%(queue)s, %(now)s, %(cap)s) AS c

-- -- listings -----------------------------------------------------------------------------------

-- fragment: payload_contains
-- A listing's payload filter (%(contains)s, JSON text or NULL), as alkstore.engine.payload_contains
-- decides it: only a payload stored as a JSON object or array (its first byte '[' or '{') is read
-- as jsonb, so raw bytes behind the codec's NUL never reach the cast. No index serves it.
(%(contains)s::text IS NULL OR CASE WHEN length(payload) = 0 THEN NULL
    WHEN get_byte(payload, 0) IN (91, 123) THEN {as_jsonb: convert_from(payload, 'UTF8')} END
    @> {as_jsonb: %(contains)s::text})

-- fragment: as_jsonb(json)
-- JSON text as jsonb, which holds no NUL in a string (a payload with one would fail the cast, and
-- with it the listing): each escape \u0000 becomes \u0001 then '0', and each \u0001 becomes \u0001
-- then '1' (an escape is a backslash after an even run of them). The change is one-to-one on strings
-- and made to payload and probe alike, so containment is as it was; text without "\u000" skips it.
CASE WHEN strpos({json}, '\u000') = 0 THEN {json}
    ELSE regexp_replace({json}, '(?<!\\)((?:\\\\)*)\\u000([01])', '\1\\u0001\2', 'g') END::jsonb

-- fragment: task_is
-- A listing's task filter (%(task)s, a task name or NULL): one more condition on the rows the
-- phase's index yields in order; no index leads with the task (ADR 048).
(%(task)s::text IS NULL OR task = %(task)s::text)

-- name: list_ready
-- Ready jobs in claim order after the key: the rest of the key's priority and the lower
-- priorities ({after_ready_tied} and {after_ready_beyond}), each a range of jobs_claim, then
-- the due 'delayed' rows.
SELECT {job_columns}, NULL::timestamptz AS died_at FROM (
    (SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
     AND {after_ready_tied} AND {payload_contains} AND {task_is}
     ORDER BY {order_ready} LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
     AND {after_ready_beyond} AND {payload_contains} AND {task_is}
     ORDER BY {order_ready} LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND state = 'delayed' AND run_at <= %(now)s
     AND {after_ready} AND {payload_contains} AND {task_is}
     ORDER BY {order_ready} LIMIT %(limit)s)) AS page
ORDER BY {order_ready} LIMIT %(limit)s

-- name: list_delayed
SELECT {job_columns}, NULL::timestamptz AS died_at FROM (
    (SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND state = 'delayed' AND run_at > %(now)s
     AND {after_delayed} AND {payload_contains} AND {task_is}
     ORDER BY {order_delayed} LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {s}.jobs WHERE queue = %(queue)s AND state = 'pending' AND run_at > %(now)s
     AND {after_delayed} AND {payload_contains} AND {task_is}
     ORDER BY {order_delayed} LIMIT %(limit)s)) AS page
ORDER BY {order_delayed} LIMIT %(limit)s

-- name: list_waiting
SELECT {job_columns}, NULL::timestamptz AS died_at FROM {s}.jobs
WHERE queue = %(queue)s AND state = 'waiting' AND {after_waiting} AND {payload_contains} AND {task_is} ORDER BY {order_waiting} LIMIT %(limit)s

-- name: list_running
SELECT {job_columns}, NULL::timestamptz AS died_at FROM {s}.jobs
WHERE queue = %(queue)s AND state = 'running' AND {after_running} AND {payload_contains} AND {task_is} ORDER BY {order_running} LIMIT %(limit)s

-- name: list_dead
SELECT {dead_as_job}, died_at FROM {s}.dead_jobs
WHERE queue = %(queue)s AND {after_dead} AND {payload_contains} AND {task_is}
ORDER BY {order_dead} LIMIT %(limit)s

-- -- actions ------------------------------------------------------------------------------------

-- name: cancel
DELETE FROM {s}.jobs WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('pending', 'delayed', 'waiting')
RETURNING id

-- name: request_cancel
-- A running job is never deleted by a cancel: it is marked, and its holder's next fenced call
-- (or the sweep of its lapsed lease) ends it cancelled (ADR 035).
UPDATE {s}.jobs AS j SET cancel_requested = true
WHERE {held_ids: %(ids)s} AND j.state = {running}
RETURNING j.id

-- name: cancel_requested
SELECT j.id, j.lease FROM {s}.jobs AS j
JOIN unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence) ON j.id = h.id AND j.lease = h.fence
WHERE {held_ids: %(ids)s} AND j.state = {running} AND j.cancel_requested

-- name: purge_dead
WITH gone AS (DELETE FROM {s}.dead_jobs WHERE id IN (
    SELECT id FROM {s}.dead_jobs WHERE queue = %(queue)s AND died_at <= %(before)s
    ORDER BY died_at LIMIT %(limit)s) RETURNING 1)
SELECT count(*) FROM gone

-- name: purge_dead_jobs
DELETE FROM {s}.dead_jobs WHERE id = ANY(%(ids)s::bigint[]) RETURNING id

-- -- workers ------------------------------------------------------------------------------------

-- fragment: worker_columns
id, host, pid, queues, concurrency, started_at, seen_at, running, processed, failed

-- name: record_worker
INSERT INTO {s}.workers ({worker_columns})
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::text[], %(concurrency)s, %(started_at)s, %(seen_at)s,
        %(running)s, %(processed)s, %(failed)s)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, started_at = excluded.started_at, seen_at = excluded.seen_at,
    running = excluded.running, processed = excluded.processed, failed = excluded.failed
RETURNING id

-- name: record_worker_counting
-- A worker's report with its runs done and failed per queue and minute since its last (ADR 048),
-- one statement: the counts cost no transaction of their own. Rows are added in key order, so
-- two workers adding to the same minutes wait for each other rather than deadlock.
WITH reported AS ({record_worker}),
counted AS (
    INSERT INTO {s}.throughput AS t (minute, queue, done, failed)
    SELECT minute, queue, done, failed
      FROM unnest(%(t_minutes)s::timestamptz[], %(t_queues)s::text[], %(t_done)s::bigint[], %(t_failed)s::bigint[])
           AS c (minute, queue, done, failed)
     ORDER BY minute, queue COLLATE "C"
    ON CONFLICT (minute, queue) DO UPDATE SET done = t.done + excluded.done, failed = t.failed + excluded.failed),
figured AS (
    -- the same runs per task, with their summed run time and pickup latency (ADR 075), in key order too
    INSERT INTO {s}.task_figures AS f (minute, queue, task, done, failed, run_ms, latency_ms)
    SELECT minute, queue, task, done, failed, run_ms, latency_ms
      FROM unnest(%(f_minutes)s::timestamptz[], %(f_queues)s::text[], %(f_tasks)s::text[], %(f_done)s::bigint[],
                  %(f_failed)s::bigint[], %(f_run_ms)s::float8[], %(f_latency_ms)s::float8[])
           AS c (minute, queue, task, done, failed, run_ms, latency_ms)
     ORDER BY minute, queue COLLATE "C", task COLLATE "C"
    ON CONFLICT (minute, queue, task) DO UPDATE SET done = f.done + excluded.done, failed = f.failed + excluded.failed,
        run_ms = f.run_ms + excluded.run_ms, latency_ms = f.latency_ms + excluded.latency_ms)
SELECT id FROM reported

-- name: remove_worker
DELETE FROM {s}.workers WHERE id = %(id)s RETURNING id

-- name: workers
SELECT {worker_columns} FROM {s}.workers WHERE seen_at >= %(since)s ORDER BY id

-- name: forget_workers
WITH gone AS (DELETE FROM {s}.workers WHERE seen_at < %(before)s RETURNING 1) SELECT count(*) FROM gone

-- -- throughput (ADR 048) ---------------------------------------------------------------------

-- name: throughput
-- The counts from a minute on: one range of the primary key.
SELECT minute, queue, done, failed FROM {s}.throughput WHERE minute >= %(since)s ORDER BY minute, queue

-- name: purge_throughput
WITH gone AS (DELETE FROM {s}.throughput WHERE minute < %(before)s RETURNING 1) SELECT count(*) FROM gone

-- name: task_figures
-- The sums from a minute on (ADR 075): one range of the primary key, a queue's rows filtered in it.
SELECT minute, queue, task, done, failed, run_ms, latency_ms FROM {s}.task_figures
WHERE minute >= %(since)s AND (%(queue)s::text IS NULL OR queue = %(queue)s::text) ORDER BY minute, queue, task

-- name: roll_up_task_figures
-- The minutes before a bound that do not start a UTC hour, deleted and added into their hour's first
-- minute, one statement (ADR 075): the hour rows are never deleted, so no row is both deleted and updated;
-- two upkeeps at once fold each row once (the second finds it deleted).
WITH folded AS (
    DELETE FROM {s}.task_figures
     WHERE minute < %(before)s AND minute <> date_trunc('hour', minute, 'UTC')
    RETURNING minute, queue, task, done, failed, run_ms, latency_ms),
added AS (
    INSERT INTO {s}.task_figures AS f (minute, queue, task, done, failed, run_ms, latency_ms)
    SELECT date_trunc('hour', minute, 'UTC'), queue, task, sum(done), sum(failed), sum(run_ms), sum(latency_ms)
      FROM folded GROUP BY 1, queue, task ORDER BY 1, queue COLLATE "C", task COLLATE "C"
    ON CONFLICT (minute, queue, task) DO UPDATE SET done = f.done + excluded.done, failed = f.failed + excluded.failed,
        run_ms = f.run_ms + excluded.run_ms, latency_ms = f.latency_ms + excluded.latency_ms)
SELECT count(*) FROM folded

-- name: purge_task_figures
WITH gone AS (DELETE FROM {s}.task_figures WHERE minute < %(before)s RETURNING 1) SELECT count(*) FROM gone

-- -- the action log (ADR 068) ----------------------------------------------------------------

-- name: record_action
INSERT INTO {s}.action_log (at, role, address, action, target, outcome)
VALUES (%(at)s, %(role)s, %(address)s, %(action)s, %(target)s, %(outcome)s)
RETURNING id

-- name: list_actions
-- Newest first, from an id down: one range of the primary key.
SELECT id, at, role, address, action, target, outcome FROM {s}.action_log
WHERE %(before)s::bigint IS NULL OR id < %(before)s::bigint
ORDER BY id DESC LIMIT %(limit)s

-- name: purge_actions
-- A bounded batch, lowest id first: a walk of the primary key from its start, where the oldest entries are.
WITH gone AS (
    DELETE FROM {s}.action_log
     WHERE id IN (SELECT id FROM {s}.action_log WHERE at < %(before)s ORDER BY id LIMIT %(limit)s)
    RETURNING 1)
SELECT count(*) FROM gone
