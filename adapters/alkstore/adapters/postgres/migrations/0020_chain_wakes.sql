-- alkstore schema, version 20: the notice for a dependent a parent's ack made ready is sent by the
-- ack's transaction itself, not by a deferred trigger per link (ADR 073, amendment of 2026-12-07,
-- chain steps).
--
-- settle_20 is settle_19 with its promotion's pending children read back. If the transaction's
-- setting alkstore.claim_follows is on (a worker's ack sets it when its next claim is the
-- statement after it, in the same transaction: the engine's statements ack_many_before_claim and
-- ack_keeping_before_claim), the trigger adds their ids to the transaction's setting
-- alkstore.promoted and sends nothing: that claim (claim_waking) notifies the queue of each of
-- them it did not take, so a child the worker took wakes nobody, as wake_18 did at commit. In
-- any other transaction (the store's own ack, a batch of acks, an ack of a job that gained
-- dependents after its claim, code of versions 18 and 19) it notifies each queue that gained a pending
-- job at once: nothing in the transaction claims before it commits.
--
-- The deferred trigger job_dependencies_wake is dropped: it queued an event per settled link and
-- ran a function with a read of the child at every such commit, some 0.1M server instructions a
-- chain's step, a seventh of what the step cost beyond an independent job
-- (bench/chain_step_instructions.py). wake_18 stays, unused, as the functions of older versions do.
--
-- Online: functions and triggers only; re-pointing jobs_settle and dropping job_dependencies_wake
-- take the ACCESS EXCLUSIVE locks of jobs and job_dependencies for a moment at the migration's
-- commit (as migration 18 did), nothing is rewritten or read. Code of versions 18 and 19 runs unchanged
-- against this schema: it never sets alkstore.claim_follows, so its acks notify at once (a worker of
-- version 18 or 19 whose claim takes the child wakes the queue's parked claims, as version 17 did).

-- As settle_19, and then the notice for the children it made pending (see above). A death still
-- goes through follow_parent_19, whose promote_19 notifies at once.
CREATE FUNCTION settle_20() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_died_at timestamptz;
    v_ready bigint[];
    v_queues text[];
    v_queue text;
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
               state = promoted_19(j.parents_left, c.n, j.run_at)
          FROM (SELECT child AS id, count(*)::integer AS n, 'waiting'::text AS waiting
                  FROM settled GROUP BY child) AS c
         WHERE j.id = c.id AND j.state = c.waiting
        RETURNING j.id, j.queue, j.state)
    SELECT (SELECT died_at FROM dead), array_agg(p.id), array_agg(p.queue)
      FROM promoted AS p WHERE p.state = 'pending'
      INTO v_died_at, v_ready, v_queues;
    IF v_ready IS NOT NULL THEN
        IF current_setting('alkstore.claim_follows', true) = 'on' THEN
            PERFORM set_config('alkstore.promoted',
                               concat_ws(',', nullif(current_setting('alkstore.promoted', true), ''),
                                         array_to_string(v_ready, ',')),
                               true);
        ELSE  -- a queue named twice sends one notice: the server folds a transaction's equal ones
            FOREACH v_queue IN ARRAY v_queues LOOP
                PERFORM pg_notify(channel(current_schema(), v_queue), '');
            END LOOP;
        END IF;
    END IF;
    IF OLD.dependents = 0 OR (OLD.state = 'running' AND NOT OLD.cancel_requested AND v_died_at IS NULL) THEN
        RETURN NULL;
    END IF;
    FOR v_child IN
        WITH failed AS (
            UPDATE job_dependencies SET state = 'failed'
             WHERE parent = OLD.id AND state = 'waiting' RETURNING child)
        SELECT child FROM failed ORDER BY child
    LOOP
        PERFORM follow_parent_19(v_child, OLD.id, coalesce(v_died_at, clock_timestamp()));
    END LOOP;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS job_dependencies_wake ON job_dependencies;

DROP TRIGGER IF EXISTS jobs_settle ON jobs;
CREATE TRIGGER jobs_settle AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION settle_20();
