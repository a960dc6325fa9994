-- alkstore schema, version 21: the settle trigger's statement without its grouping (ADR 073,
-- amendment of 2026-12-07, a chain through a worker).
--
-- settle_21 is settle_20 with the children it promotes read straight from the links it settled:
-- a link's key is (child, parent), so the links of one parent name each child once, and the
-- count settle_20 grouped them by was always 1. The grouping (a hash aggregate started and run at
-- every ack of a job with dependents) was some 0.07M of the 0.47M server instructions the trigger
-- costs a chain's step (bench/chain_step_instructions.py). Nothing else changes: the same links
-- settled, the same rule (promoted_19), the same notices.
--
-- Online: a function and the trigger re-pointed (the ACCESS EXCLUSIVE lock of jobs for a moment
-- at the migration's commit, as migration 20 took); nothing is rewritten or read. Code of versions
-- 18 to 20 runs unchanged against this schema. settle_20 stays, unused.

CREATE FUNCTION settle_21() RETURNS trigger
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
        RETURNING d.child, 'waiting'::text AS waiting),
    promoted AS (
        UPDATE jobs AS j
           SET parents_left = j.parents_left - 1,
               state = promoted_19(j.parents_left, 1, j.run_at)
          FROM settled AS c
         WHERE j.id = c.child AND j.state = c.waiting
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

DROP TRIGGER IF EXISTS jobs_settle ON jobs;
CREATE TRIGGER jobs_settle AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION settle_21();
