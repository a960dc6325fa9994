-- Jobs: enqueue, the waiting claims' channels, and the calls that finish or hand back a claimed
-- job. The claim itself is in claim.sql; inspection and operators' actions in operations.sql.

-- fragment: state_at(run_at)
-- A new (or handed back) job's state: one due at its enqueue is ready ('pending'); one still
-- ahead is 'delayed'.
CASE WHEN {run_at} > %(now)s THEN 'delayed' ELSE 'pending' END

-- fragment: ids_and_notices(changed)
-- The ids of the rows of the CTE named, then one NULL row after a notice to the channel of each
-- queue they are in (the engine drops the NULL).
SELECT id FROM {changed}
UNION ALL
SELECT NULL FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')
                  FROM (SELECT DISTINCT queue FROM {changed}) AS queues) AS notified

-- -- enqueue --------------------------------------------------------------------------------

-- name: enqueue_one
WITH new AS (
    INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,
                          visibility_us, task, trace, enqueued_at)
    VALUES (%(queue)s, %(payload)s, {state_at: %(run_at)s::timestamptz}, %(priority)s,
            %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s, %(now)s)
    RETURNING id)
SELECT id, pg_notify(%(channel)s, '') FROM new

-- name: enqueue_alike
-- A batch whose jobs differ only in their payloads (one enqueue_many call): one array, the rest
-- scalars.
WITH new AS (
    INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,
                          visibility_us, task, trace, enqueued_at)
    SELECT %(queue)s, payload, {state_at: %(run_at)s::timestamptz}, %(priority)s,
           %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s, %(now)s
    FROM unnest(%(payloads)b::bytea[]) AS new(payload)
    RETURNING id)
SELECT id FROM new
UNION ALL
SELECT NULL FROM (SELECT pg_notify(%(channel)s, '')) AS notified

-- name: enqueue_many
WITH new AS (
    INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,
                          visibility_us, task, trace, enqueued_at)
    SELECT queue, payload, {state_at: run_at}, priority, run_at, expires_at,
           max_attempts, visibility_us, task, trace, %(now)s
    FROM unnest(%(queues)s::text[], %(payloads)b::bytea[], %(priorities)s::integer[],
                %(run_ats)s::timestamptz[], %(expires_ats)s::timestamptz[], %(max_attempts)s::integer[],
                %(visibility_us)s::bigint[], %(tasks)s::text[], %(traces)s::text[])
      AS new(queue, payload, priority, run_at, expires_at, max_attempts, visibility_us, task, trace)
    RETURNING id, queue)
{ids_and_notices: new}

-- -- keyed jobs (ADR 031, ADR 032) ---------------------------------------------------------
-- A job with a unique or an ordering key is inserted on its own, after the locks of the batch's
-- ordering keys (in one order, so two batches never wait on each other in a cycle): a job of a
-- key with an unfinished job is stored waiting, and a unique key already held inserts nothing.

-- name: lock_ordering_keys
SELECT {s}.lock_ordering_key_6(%(schema)s, k.queue, k.key)
FROM (SELECT DISTINCT queue, key FROM unnest(%(queues)s::text[], %(keys)s::text[]) AS k(queue, key)
      ORDER BY queue, key) AS k

-- name: enqueue_keyed
WITH new AS (
    INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,
                          visibility_us, task, trace, enqueued_at, unique_key, unique_running, ordering_key,
                          rate_key)
    VALUES (%(queue)s, %(payload)s,
            CASE WHEN %(ordering_key)s::text IS NOT NULL AND EXISTS (
                     SELECT 1 FROM {s}.jobs WHERE queue = %(queue)s AND ordering_key = %(ordering_key)s::text)
                 THEN 'waiting' ELSE {state_at: %(run_at)s::timestamptz} END,
            %(priority)s, %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s,
            %(now)s, %(unique_key)s, %(unique_running)s, %(ordering_key)s, %(rate_key)s)
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id, state)
SELECT id, pg_notify(%(channel)s, '') FROM new WHERE state <> 'waiting'
UNION ALL
SELECT id, NULL FROM new WHERE state = 'waiting'

-- name: unique_holder
SELECT id FROM {s}.jobs WHERE queue = %(queue)s AND unique_key = %(unique_key)s

-- -- waiting claims (ADR 011) ---------------------------------------------------------------

-- name: channel
SELECT {s}.channel(%(schema)s, %(queue)s) AS channel

-- name: listen
SELECT {s}.listen(%(schema)s, %(queue)s)

-- name: unlisten
UNLISTEN *

-- -- finishing a claimed job ----------------------------------------------------------------
-- The fenced calls return a row for each job whose fence still held (and which they changed).

-- fragment: running
-- The running state compared as a subquery, in the fenced calls that find held jobs by id: no
-- plan can then read them through jobs_lease (the partial index of running jobs), only through
-- the primary key. A plan that scanned jobs_lease and filtered on id looked as cheap while the
-- index was small, and read every dead entry a pinned horizon keeps there at each call (ADR 066).
(SELECT 'running'::text)

-- fragment: held_ids(ids)
-- The jobs (j) of a list of ids (the array parameter named), as the scan's own condition: every
-- statement that finds jobs by a list of ids states it beside its join to the list. Without it, on
-- a table of few live rows, the plan walked the whole primary key and joined the ids afterwards,
-- every dead entry of a pinned horizon at each call (ADR 066).
j.id = ANY({ids}::bigint[])

-- name: ack_one
DELETE FROM {s}.jobs WHERE id = %(id)s AND state = {running} AND lease = %(fence)s RETURNING id

-- name: ack_many
DELETE FROM {s}.jobs AS j USING unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)
WHERE {held_ids: %(ids)s} AND j.id = h.id AND j.state = {running} AND j.lease = h.fence
RETURNING j.id

-- name: ack_many_before_claim
-- ack_many as the first statement of a pipelined ack and claim (claim.sql's claim_follows). Its
-- lists are subqueries, so that no plan knows their length: a custom plan that knew it was one id
-- looked cheaper than the generic one (which guesses ten), and the server planned the statement
-- anew at every call (as ADR 049 found of the claim), more server time than the rest of the ack.
DELETE FROM {s}.jobs AS j
USING unnest((SELECT %(ids)s::bigint[]), (SELECT %(fences)s::bigint[])) AS h(id, fence)
WHERE {held_ids: (SELECT %(ids)s::bigint[])} AND j.id = h.id AND j.state = {running} AND j.lease = h.fence
  AND {claim_follows}
RETURNING j.id

-- fragment: cancelled_instead
-- The CTE "cancelled": of the held jobs (h), those whose cancel was requested, deleted: they end
-- cancelled whatever their holder asked (ADR 035).
cancelled AS (
    DELETE FROM {s}.jobs AS j USING unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)
    WHERE {held_ids: %(ids)s} AND j.id = h.id AND j.state = {running} AND j.lease = h.fence AND j.cancel_requested
    RETURNING j.id)

-- name: retry
-- A retry's attempt (its queue keeps results, ADR 042) is appended to the job's attempt log.
WITH {cancelled_instead},
job AS (
    UPDATE {s}.jobs AS j SET state = {state_at: r.run_at}, run_at = r.run_at,
           last_error = r.error, last_traceback = r.traceback, worker_id = NULL, lease_until = NULL,
           attempt_log = CASE WHEN r.attempt IS NULL THEN j.attempt_log
                              ELSE array_append(j.attempt_log, r.attempt) END
    FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(run_ats)s::timestamptz[], %(errors)b::bytea[],
                %(tracebacks)b::bytea[], %(attempt_entries)b::bytea[])
      AS r(id, fence, run_at, error, traceback, attempt)
    WHERE {held_ids: %(ids)s} AND j.id = r.id AND j.state = {running} AND j.lease = r.fence AND NOT j.cancel_requested
    RETURNING j.id, j.queue)
SELECT id FROM cancelled
UNION ALL
{ids_and_notices: job}

-- name: bury
-- Each burial's attempt (its queue keeps results) is appended to the attempt log the dead job keeps (ADR 064).
SELECT id FROM {s}.bury_10(%(ids)s, %(fences)s, %(errors)b::bytea[], %(tracebacks)b::bytea[],
                           %(attempt_entries)b::bytea[], %(now)s) AS id

-- name: release
WITH {cancelled_instead},
job AS (
    UPDATE {s}.jobs AS j SET state = {state_at: j.run_at},
           attempts = greatest(j.attempts - 1, 0), worker_id = NULL, lease_until = NULL
    FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)
    WHERE {held_ids: %(ids)s} AND j.id = h.id AND j.state = {running} AND j.lease = h.fence AND NOT j.cancel_requested
    RETURNING j.id, j.queue)
SELECT id FROM cancelled
UNION ALL
{ids_and_notices: job}

-- name: heartbeat
-- Each moved job says whether its cancel was requested: its holder learns so from its heartbeat (ADR 035).
UPDATE {s}.jobs AS j SET lease_until = b.lease_until
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(lease_untils)s::timestamptz[])
  AS b(id, fence, lease_until)
WHERE {held_ids: %(ids)s} AND j.id = b.id AND j.state = {running} AND j.lease = b.fence
RETURNING j.id, j.cancel_requested

-- -- one job, live or dead ------------------------------------------------------------------

-- name: dead_ordering_keys
SELECT queue, ordering_key FROM {s}.dead_jobs WHERE id = ANY(%(ids)s::bigint[]) AND ordering_key IS NOT NULL

-- name: get_job
-- With the job's attempt log (its queue keeps results), which a dead job keeps too (ADR 064).
SELECT {job_columns}, NULL::timestamptz AS died_at, attempt_log FROM {s}.jobs WHERE id = %(id)s
UNION ALL
SELECT {dead_as_job}, died_at, attempt_log FROM {s}.dead_jobs WHERE id = %(id)s

-- name: requeue_dead
-- A requeued job of an ordering key waits behind its key's unfinished jobs, and behind the
-- requeued ones of its key with a lower id (the engine locks the keys first); it keeps its
-- rate_key and its policy, and a dependent's links stay for the engine to link it again (ADR 077).
WITH dead AS (DELETE FROM {s}.dead_jobs WHERE id = ANY(%(ids)s::bigint[]) RETURNING *),
job AS (
    INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,
                          last_error, last_traceback, schedule, boundary, enqueued_at, lease, visibility_us,
                          task, trace, ordering_key, rate_key, on_parent_failure)
    SELECT id, queue, payload,
           CASE WHEN ordering_key IS NOT NULL AND (
                    row_number() OVER (PARTITION BY queue, ordering_key ORDER BY id) > 1
                    OR EXISTS (SELECT 1 FROM {s}.jobs AS j
                               WHERE j.queue = dead.queue AND j.ordering_key = dead.ordering_key))
                THEN 'waiting' ELSE 'pending' END,
           priority, %(now)s, NULL, 0, max_attempts,
           last_error, last_traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace,
           ordering_key, rate_key, on_parent_failure
    FROM dead
    RETURNING id, queue)
{ids_and_notices: job}
