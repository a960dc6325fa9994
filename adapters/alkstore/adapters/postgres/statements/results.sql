-- Kept results (ADR 042): the acks that keep a job's outcome, and reading and purging the kept
-- outcomes. A plain ack (no result kept) is ack_one or ack_many in jobs.sql, unchanged.

-- fragment: result_columns
id, queue, payload, task, attempts, max_attempts, enqueued_at, started_at, finished_at, keep_until,
worker_id, result, attempt_log

-- fragment: handed(acked)
-- The CTE "handed": the result of each job acked (in the CTE named) given to the dependents waiting
-- on it (ADR 073); their promotion is the trigger settle_21's, at the end of the statement.
handed AS (
    UPDATE {s}.job_dependencies AS d SET result = a.result
    FROM {acked} AS a
    WHERE d.parent = a.id AND d.state = 'waiting' AND a.result IS NOT NULL AND NOT a.cancel_requested)

-- fragment: keeping_acks
-- The CTEs "acked" and "kept": each held job (h) still running under its fence deleted, as
-- ack_many does, and the outcome of each one whose ack keeps it (h.keep) and whose cancel was not
-- requested inserted into results with the job's attempt log. One statement: the result and the
-- job's deletion (with the promotion its trigger makes) commit together or not at all. The lists
-- are subqueries, as in jobs.sql's ack_many_before_claim: a custom plan that knew their length
-- looked cheaper than the generic one, and the server planned the ack anew at every call.
acked AS (
    DELETE FROM {s}.jobs AS j
    USING unnest((SELECT %(ids)s::bigint[]), (SELECT %(fences)s::bigint[]), (SELECT %(keeps)s::boolean[]),
                 (SELECT %(results)b::bytea[]), (SELECT %(started_ats)s::timestamptz[]),
                 (SELECT %(finished_ats)s::timestamptz[]), (SELECT %(keep_untils)s::timestamptz[]))
      AS h(id, fence, keep, result, started_at, finished_at, keep_until)
    WHERE {held_ids: (SELECT %(ids)s::bigint[])} AND j.id = h.id AND j.state = {running} AND j.lease = h.fence
    RETURNING j.id, j.queue, j.payload, j.task, j.attempts, j.max_attempts, j.enqueued_at, j.worker_id,
              j.attempt_log, j.cancel_requested, h.keep, h.result, h.started_at, h.finished_at, h.keep_until),
kept AS (
    INSERT INTO {s}.results ({result_columns})
    SELECT {result_columns} FROM acked WHERE keep AND NOT cancel_requested),
{handed: acked}

-- name: ack_keeping
WITH {keeping_acks}
SELECT id FROM acked

-- name: ack_keeping_before_claim
-- ack_keeping as the first statement of a pipelined ack and claim (claim.sql's claim_follows).
WITH {keeping_acks}
SELECT id FROM acked WHERE {claim_follows}

-- name: ack_keeping_one
-- ack_keeping for one job, shaped as ack_one is: a delete by primary key, no arrays to join.
WITH acked AS (
    DELETE FROM {s}.jobs WHERE id = %(id)s AND state = {running} AND lease = %(fence)s
    RETURNING id, queue, payload, task, attempts, max_attempts, enqueued_at, worker_id, attempt_log,
              cancel_requested),
kept AS (
    INSERT INTO {s}.results ({result_columns})
    SELECT id, queue, payload, task, attempts, max_attempts, enqueued_at, %(started_at)s::timestamptz,
           %(finished_at)s::timestamptz, %(keep_until)s::timestamptz, worker_id, %(result)b::bytea, attempt_log
    FROM acked WHERE NOT cancel_requested),
handed AS (
    UPDATE {s}.job_dependencies AS d SET result = %(result)b::bytea
    FROM acked AS a WHERE d.parent = a.id AND d.state = 'waiting' AND NOT a.cancel_requested)
SELECT id FROM acked

-- name: ack_keeping_and_claim
-- ack_and_claim (claim.sql) with acks of which some keep their outcome.
WITH {keeping_acks},
{claim_after: acked}

-- name: ack_keeping_and_claim_full
-- ack_and_claim_full (claim.sql) with acks of which some keep their outcome.
WITH {keeping_acks},
{claim_after_full: acked}

-- name: get_result
SELECT {result_columns} FROM {s}.results WHERE id = %(id)s

-- name: list_results
-- A page of a queue's results, newest first, after the key (%(at)s, %(id)s) when one is given.
SELECT {result_columns} FROM {s}.results
WHERE queue = %(queue)s
  AND (%(at)s::timestamptz IS NULL OR (finished_at, id) < (%(at)s::timestamptz, %(id)s::bigint))
ORDER BY finished_at DESC, id DESC
LIMIT %(limit)s

-- name: purge_results
-- Up to %(limit)s results past their keep_until, of one queue or (%(queue)s NULL) of any.
WITH gone AS (DELETE FROM {s}.results WHERE id IN (
    SELECT id FROM {s}.results
    WHERE keep_until <= %(now)s AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
    ORDER BY keep_until LIMIT %(limit)s) RETURNING 1)
SELECT count(*) FROM gone
