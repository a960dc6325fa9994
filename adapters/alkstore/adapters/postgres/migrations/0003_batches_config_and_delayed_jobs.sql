-- alkstore schema, version 3: delayed jobs in a state of their own, queue configuration, and
-- the columns the batch-shaped engine, the worker and telemetry need.
--
-- Function bodies never change once created: a function whose behaviour changes gets a new
-- name carrying the version that made it (`sweep_3`), so code of one version never runs the
-- body of another during a rolling upgrade. The unsuffixed functions of version 1 stay, for
-- code of versions 1 and 2 still running against this schema.

-- Jobs: a pending job whose run_at is still ahead is 'delayed', kept out of the claim index
-- (so delayed jobs of a higher priority are never walked by claims, however many), and made
-- 'pending' by the claim's sweep once due. 'pending' here is "ready"; the engine reports both
-- as pending. visibility_us is a job's own lease length (NULL: its queue's at each claim);
-- task, last_traceback and trace are carried for the task layer, the worker and telemetry.
ALTER TABLE jobs
    ADD COLUMN visibility_us bigint,
    ADD COLUMN task text,
    ADD COLUMN last_traceback bytea,
    ADD COLUMN trace text;
ALTER TABLE dead_jobs
    ADD COLUMN visibility_us bigint,
    ADD COLUMN task text,
    ADD COLUMN last_traceback bytea,
    ADD COLUMN trace text;

-- Delayed jobs by due time: the sweep promotes from its left end.
CREATE INDEX jobs_delayed ON jobs (queue, run_at) WHERE state = 'delayed';
-- The expiry sweep covers delayed jobs too.
DROP INDEX jobs_expiry;
CREATE INDEX jobs_expiry ON jobs (queue, expires_at)
    WHERE state IN ('pending', 'delayed') AND expires_at IS NOT NULL;

-- Queue configuration: what a user stored for a queue (NULL columns: the derived default).
CREATE TABLE queues (
    name            text COLLATE "C" PRIMARY KEY,
    visibility_us   bigint CHECK (visibility_us > 0),
    max_attempts    integer CHECK (max_attempts >= 1),
    backoff_base_us bigint CHECK (backoff_base_us > 0),
    backoff_cap_us  bigint CHECK (backoff_cap_us > 0),
    priority        integer
);

-- Schedules: the task their fires are for, and the last boundary fired.
ALTER TABLE schedules
    ADD COLUMN task text,
    ADD COLUMN last_boundary timestamptz;

-- Burying: the one statement that moves jobs to dead_jobs. A fence per job makes it a fenced
-- call (only a running job under that fence moves); a NULL fence is the sweeps' (the caller
-- has locked the rows). Returns the ids it buried.
CREATE FUNCTION bury_3(
    p_ids bigint[],
    p_fences bigint[],
    p_errors bytea[],
    p_tracebacks bytea[],
    p_now timestamptz
) RETURNS SETOF bigint
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH gone AS (
        DELETE FROM jobs AS j
         USING unnest(p_ids, p_fences, p_errors, p_tracebacks) AS b(id, fence, error, traceback)
         WHERE j.id = b.id
           AND (b.fence IS NULL OR (j.state = 'running' AND j.lease = b.fence))
        RETURNING j.id, j.queue, j.payload, j.priority, j.run_at, j.expires_at, j.attempts, j.max_attempts,
                  b.error, b.traceback, j.schedule, j.boundary, j.enqueued_at, j.lease, j.visibility_us,
                  j.task, j.trace
    )
    INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                           last_error, last_traceback, schedule, boundary, enqueued_at, lease,
                           visibility_us, task, trace, died_at)
    SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
           error, traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace, p_now
      FROM gone
    RETURNING id
$$;

-- The claim's sweep of one queue, in the port's order (alkstore.engine.Engine.claim): lapsed
-- leases on their last attempt die, other lapsed leases are pending again, expired jobs die,
-- then due delayed jobs become pending (at most 10,000 a sweep, oldest first). Rows another
-- transaction holds are skipped: that transaction decides their fate, and concurrent
-- claimers never wait on, or deadlock with, each other.
CREATE FUNCTION sweep_3(
    p_queue text,
    p_now timestamptz,
    p_lease_expired_error bytea,
    p_job_expired_error bytea
) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    SELECT array_agg(id) INTO v_ids FROM (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now AND attempts >= max_attempts
         FOR UPDATE SKIP LOCKED) AS lapsed;
    IF v_ids IS NOT NULL THEN
        PERFORM bury_3(v_ids, NULL, array_fill(p_lease_expired_error, ARRAY[cardinality(v_ids)]), NULL, p_now);
    END IF;

    UPDATE jobs SET state = 'pending', worker_id = NULL, lease_until = NULL
     WHERE id IN (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now AND attempts < max_attempts
         FOR UPDATE SKIP LOCKED);

    SELECT array_agg(id) INTO v_ids FROM (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state IN ('pending', 'delayed') AND expires_at <= p_now
         FOR UPDATE SKIP LOCKED) AS expired;
    IF v_ids IS NOT NULL THEN
        PERFORM bury_3(v_ids, NULL, array_fill(p_job_expired_error, ARRAY[cardinality(v_ids)]), NULL, p_now);
    END IF;

    UPDATE jobs SET state = 'pending'
     WHERE id IN (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'delayed' AND run_at <= p_now
         ORDER BY run_at
         LIMIT 10000
         FOR UPDATE SKIP LOCKED);
END
$$;
