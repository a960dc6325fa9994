-- alkstore schema, version 18: a parent's ack promotes its dependents in one statement and wakes
-- idle workers only for a child still ready when the ack commits; a burial carries a job's
-- rate_key and on_parent_failure itself (ADR 073, amendment of 2026-12-07, chain acks).
--
-- settle_18 is settle_15 with promote_15's update folded into its first statement (no nested
-- call). Its NOTIFY moved to the ack's commit: a deferred trigger on each link the ack settled
-- wakes the child's queue if the child is then pending. A worker whose ack carries its next claim
-- (the claim a statement after the ack, in the same transaction) has taken the child by then, so
-- nobody is woken for it; a child nobody in the transaction took (another queue, a full claim, the
-- store's own ack) wakes its queue's parked claims as before. A child promoted by a parent's death
-- (policy 'run') still goes through follow_parent_15 and promote_15, which notify at once. A link
-- that committed while the ack waited for its enqueue's row lock gets the parent's result here
-- (the ack's statement, with its older snapshot, missed it).
--
-- bury_10 is replaced (same name, arguments and result): the dead row takes the job's rate_key and
-- on_parent_failure from the deleted row. The trigger jobs_keep_on_death, which did the same with
-- an update of dead_jobs after every delete of a job with either (an ack as well: it doubled the
-- server time of acking such a job), is dropped; keep_on_death_17 stays, unused, as the functions
-- of older versions do.
--
-- Online: functions and triggers only; re-pointing jobs_settle and dropping jobs_keep_on_death
-- take jobs' ACCESS EXCLUSIVE lock for a moment at the migration's commit (as migration 8 did),
-- nothing is rewritten or read. Code of version 17 runs unchanged against this schema: it calls no
-- settle or wake function, and its burials go through bury_10, which now does what the dropped
-- trigger did.

CREATE OR REPLACE FUNCTION bury_10(
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
                       ELSE array_append(j.attempt_log, b.attempt) END AS attempt_log,
                  j.rate_key, j.on_parent_failure
    ),
    dead AS (
        INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                               last_error, last_traceback, schedule, boundary, enqueued_at, lease,
                               visibility_us, task, trace, ordering_key, died_at, attempt_log,
                               rate_key, on_parent_failure)
        SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
               error, traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace,
               ordering_key, p_now, attempt_log, rate_key, on_parent_failure
          FROM gone WHERE NOT cancel_requested
        RETURNING id
    )
    SELECT id FROM gone
$$;

DROP TRIGGER IF EXISTS jobs_keep_on_death ON jobs;

-- As settle_15, but the first statement also promotes the dependents it settled as succeeded:
-- each counts one parent fewer and one with none left becomes pending (or delayed, by its run_at
-- on the database's clock). Each child is a primary-key probe (its state compared with a column of
-- the children's list, so the partial index jobs_waiting is no path to the rows; see promote_15).
-- No NOTIFY here: wake_18 sends it at commit, if the child is still pending then.
-- A link settled without the parent's result takes it from a sibling link the ack's statement
-- wrote, or from the parent's kept outcome: a link committed while the ack waited for the
-- enqueue's row lock is seen here (this statement's snapshot is newer) but was not by the ack's
-- statement, which handed the result over (ADR 073's result race). A link that has its result, or a
-- parent acked without one, reads nothing more (the two reads run only when needed).
CREATE FUNCTION settle_18() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_died_at timestamptz;
    v_child bigint;
BEGIN
    WITH dead AS (SELECT died_at FROM dead_jobs WHERE id = OLD.id),
    unlinked AS (
        DELETE FROM job_dependencies
         WHERE child = OLD.id AND OLD.on_parent_failure IS NOT NULL AND NOT EXISTS (SELECT FROM dead)),
    settled AS (
        UPDATE job_dependencies AS d
           SET state = 'succeeded',
               result = coalesce(d.result,
                                 (SELECT h.result FROM job_dependencies AS h
                                   WHERE h.parent = OLD.id AND h.state = 'waiting' AND h.result IS NOT NULL
                                   LIMIT 1),
                                 (SELECT r.result FROM results AS r WHERE r.id = OLD.id))
         WHERE d.parent = OLD.id AND d.state = 'waiting' AND OLD.dependents > 0
           AND OLD.state = 'running' AND NOT OLD.cancel_requested AND NOT EXISTS (SELECT FROM dead)
        RETURNING d.child),
    promoted AS (
        UPDATE jobs AS j
           SET parents_left = j.parents_left - c.n,
               state = CASE WHEN j.parents_left > c.n THEN 'waiting'
                            WHEN j.run_at <= clock_timestamp() THEN 'pending' ELSE 'delayed' END
          FROM (SELECT child AS id, count(*)::integer AS n, 'waiting'::text AS waiting
                  FROM settled GROUP BY child) AS c
         WHERE j.id = c.id AND j.state = c.waiting)
    SELECT (SELECT died_at FROM dead) INTO v_died_at;
    IF OLD.dependents = 0 OR (OLD.state = 'running' AND NOT OLD.cancel_requested AND v_died_at IS NULL) THEN
        RETURN NULL;
    END IF;
    FOR v_child IN
        WITH failed AS (
            UPDATE job_dependencies SET state = 'failed'
             WHERE parent = OLD.id AND state = 'waiting' RETURNING child)
        SELECT child FROM failed ORDER BY child
    LOOP
        PERFORM follow_parent_15(v_child, OLD.id, coalesce(v_died_at, clock_timestamp()));
    END LOOP;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS jobs_settle ON jobs;
CREATE TRIGGER jobs_settle AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION settle_18();

-- At the commit of a transaction that settled a link as succeeded: the child's queue is notified
-- if the child is pending then (a parked claim there wakes), and not if the transaction claimed it
-- meanwhile or it still waits on other parents. Several links of one child, or children of one
-- queue, send the same notice, which the server sends once per transaction.
CREATE FUNCTION wake_18() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM pg_notify(channel(current_schema(), queue), '') FROM jobs WHERE id = NEW.child AND state = 'pending';
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER job_dependencies_wake AFTER UPDATE OF state ON job_dependencies
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.state = 'waiting' AND NEW.state = 'succeeded')
    EXECUTE FUNCTION wake_18();
