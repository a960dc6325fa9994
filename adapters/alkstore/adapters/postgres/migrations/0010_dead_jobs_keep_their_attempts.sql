-- alkstore schema, version 10: a job says when its latest claim was, and a dead job keeps its
-- attempt log, its last attempt appended (ADR 064).
--
-- Online: one nullable column on each of jobs and dead_jobs (catalogue only: no rewrite, no scan;
-- the ACCESS EXCLUSIVE each takes lasts until the migration commits, which is a moment) and a new
-- function. Code of version 9 runs unchanged against this schema: its claims leave claimed_at as
-- it was, it buries through bury_6, which leaves the new column of dead_jobs NULL, and it reads
-- neither. The claim's sweep still buries through bury_6 (a lapsed
-- last lease, an expired job): such a dead job keeps no attempt log.

-- -- jobs ------------------------------------------------------------------------------------------

-- When the job's latest claim was (the start of the attempt running now, while it runs): set by
-- every claim, in the row the claim updates anyway; in no index. NULL until its first claim.
ALTER TABLE jobs ADD COLUMN claimed_at timestamptz;

-- -- dead_jobs -----------------------------------------------------------------------------------

-- The failed attempts of a dead job whose queue kept results, as core encoded them (oldest first),
-- its last one included when its burial logged it: bounded by its attempts, each entry's traceback
-- cut by core, and gone with the dead row (dead retention, purge). NULL for every other dead job.
ALTER TABLE dead_jobs ADD COLUMN attempt_log bytea[];

-- -- functions -----------------------------------------------------------------------------------

-- Burying, as bury_6, except that the job's attempt log goes with the dead row, with the burial's
-- attempt (p_attempts, NULL where the queue keeps no results) appended.
CREATE FUNCTION bury_10(
    p_ids bigint[],
    p_fences bigint[],
    p_errors bytea[],
    p_tracebacks bytea[],
    p_attempts bytea[],
    p_now timestamptz
) RETURNS SETOF bigint
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH gone AS (
        DELETE FROM jobs AS j
         USING unnest(p_ids, p_fences, p_errors, p_tracebacks, p_attempts) AS b(id, fence, error, traceback, attempt)
         WHERE j.id = b.id
           AND (b.fence IS NULL OR (j.state = 'running' AND j.lease = b.fence))
        RETURNING j.id, j.queue, j.payload, j.priority, j.run_at, j.expires_at, j.attempts, j.max_attempts,
                  b.error, b.traceback, j.schedule, j.boundary, j.enqueued_at, j.lease, j.visibility_us,
                  j.task, j.trace, j.ordering_key, j.cancel_requested,
                  CASE WHEN b.attempt IS NULL THEN j.attempt_log
                       ELSE array_append(j.attempt_log, b.attempt) END AS attempt_log
    ),
    dead AS (
        INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                               last_error, last_traceback, schedule, boundary, enqueued_at, lease,
                               visibility_us, task, trace, ordering_key, died_at, attempt_log)
        SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
               error, traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace,
               ordering_key, p_now, attempt_log
          FROM gone WHERE NOT cancel_requested
        RETURNING id
    )
    SELECT id FROM gone
$$;
