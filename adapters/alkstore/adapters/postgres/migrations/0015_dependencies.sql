-- alkstore schema, dependencies: a job may wait on other jobs (its parents) and runs once each of
-- them succeeded; a parent that dies hands each waiting dependent to its own policy (ADR 068).
--
-- A dependent is stored 'waiting' (the state a job behind its ordering key has: out of jobs_claim,
-- so the claim path reads nothing more) with parents_left counting its parents not yet finished;
-- job_dependencies holds one row per (child, parent). A parent's dependents column says a child
-- was ever enqueued after it: the enqueue increments it, which also row-locks the parent until the
-- enqueue commits, so a parent's ack (a DELETE, which waits for that lock) cannot miss a dependent
-- being enqueued. The promotion is a trigger on that DELETE, only for a row whose dependents is
-- set: an ack of a job nobody waits on runs no more than it did. Its statements read with a
-- snapshot of their own (a volatile function), so they see the edges committed while it waited.
--
-- Online: two columns with constant defaults on jobs, one nullable column (catalogue only), a new
-- table and functions and triggers. Code of the previous version runs unchanged against this
-- schema: it never sets dependents, so the triggers never run for its jobs.

ALTER TABLE jobs
    ADD COLUMN dependents integer NOT NULL DEFAULT 0,
    ADD COLUMN parents_left integer NOT NULL DEFAULT 0,
    ADD COLUMN on_parent_failure text;

-- One row per parent of a dependent, in the order the enqueue named them (position): 'waiting'
-- until the parent finishes, then 'succeeded' (with the result it handed over, if any) or
-- 'failed'. A child's rows go with it when it is deleted (acked, cancelled) or purged dead.
CREATE TABLE job_dependencies (
    child    bigint NOT NULL,
    parent   bigint NOT NULL,
    position integer NOT NULL,
    state    text NOT NULL,
    result   bytea,
    PRIMARY KEY (child, parent)
);
-- The waiting dependents of a parent: what its end reads.
CREATE INDEX job_dependencies_parent ON job_dependencies (parent) WHERE state = 'waiting';

-- A dependent whose parent died follows its policy: 'run' (that parent holds it back no more),
-- 'cancel' (deleted: it ends cancelled) or 'die' (buried, its error naming the parent, in the
-- words of alkstore.engine.parent_failed_error); a dependent deleted or buried so is itself a
-- parent that died, through the same trigger.
CREATE FUNCTION follow_parent_15(p_child bigint, p_parent bigint, p_died_at timestamptz) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_policy text;
BEGIN
    SELECT on_parent_failure INTO v_policy FROM jobs WHERE id = p_child FOR UPDATE;
    IF v_policy = 'cancel' THEN
        DELETE FROM jobs WHERE id = p_child;
    ELSIF v_policy = 'die' THEN
        PERFORM bury_10(ARRAY[p_child], NULL,
                        ARRAY[convert_to(format('parent job %s did not succeed', p_parent), 'UTF8')],
                        NULL, ARRAY[NULL::bytea], p_died_at);
    ELSIF v_policy = 'run' THEN
        PERFORM promote_15(ARRAY[p_child]);
    END IF;
END
$$;

-- Each of p_children counts one parent fewer; one with none left becomes pending (or delayed, by
-- its run_at on the database's clock, as promote_8 does). One statement: the update, then one
-- NOTIFY per queue that gained a pending job (a parked claim there wakes), none for a delayed one.
-- The state is compared with a column of the children's list, not a constant, so the partial
-- index jobs_waiting is no path to the rows: each child is a primary-key probe, where a plan on
-- that index (chosen on statistics taken before a graph was stored) was seen reading every waiting
-- job to promote one (950 rows, a chain of 1,000 at its 50th step).
CREATE FUNCTION promote_15(p_children bigint[]) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_woken integer;
BEGIN
    WITH promoted AS (
        UPDATE jobs AS j
           SET parents_left = j.parents_left - c.n,
               state = CASE WHEN j.parents_left > c.n THEN 'waiting'
                            WHEN j.run_at <= clock_timestamp() THEN 'pending' ELSE 'delayed' END
          FROM (SELECT id, count(*)::integer AS n, 'waiting'::text AS waiting
                  FROM unnest(p_children) AS ids(id) GROUP BY id) AS c
         WHERE j.id = c.id AND j.state = c.waiting
        RETURNING j.queue, j.state)
    SELECT count(pg_notify(channel(current_schema(), q.queue), '')) INTO v_woken
      FROM (SELECT DISTINCT queue FROM promoted WHERE state = 'pending') AS q;
END
$$;

-- A job with dependents left the jobs table: acked (it was running, its cancel not requested, and
-- it did not move to dead_jobs) its waiting dependents count it as succeeded; otherwise it died.
-- A job with parents deleted for good (not moved to dead_jobs) takes its rows of job_dependencies.
-- The first statement does all of it but a death: whether the job died, its own rows dropped, its
-- dependents settled (so a chain's step runs it and promote_15's, nothing more).
CREATE FUNCTION settle_15() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_died_at timestamptz;
    v_child bigint;
    v_children bigint[];
BEGIN
    WITH dead AS (SELECT died_at FROM dead_jobs WHERE id = OLD.id),
    unlinked AS (
        DELETE FROM job_dependencies
         WHERE child = OLD.id AND OLD.on_parent_failure IS NOT NULL AND NOT EXISTS (SELECT FROM dead)),
    settled AS (
        UPDATE job_dependencies SET state = 'succeeded'
         WHERE parent = OLD.id AND state = 'waiting' AND OLD.dependents > 0
           AND OLD.state = 'running' AND NOT OLD.cancel_requested AND NOT EXISTS (SELECT FROM dead)
        RETURNING child)
    SELECT (SELECT died_at FROM dead), (SELECT array_agg(child) FROM settled) INTO v_died_at, v_children;
    IF v_children IS NOT NULL THEN
        PERFORM promote_15(v_children);
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
        PERFORM follow_parent_15(v_child, OLD.id, coalesce(v_died_at, clock_timestamp()));
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_settle AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION settle_15();

-- Purged dead dependents take their rows of job_dependencies (a requeued one too: it runs
-- without waiting again).
CREATE FUNCTION unlink_dead_15() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM job_dependencies AS d USING gone WHERE d.child = gone.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER dead_jobs_unlink AFTER DELETE ON dead_jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION unlink_dead_15();
