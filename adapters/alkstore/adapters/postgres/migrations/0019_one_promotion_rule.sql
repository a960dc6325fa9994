-- alkstore schema, version 19: when a dependent becomes claimable is stated once, by promoted_19
-- (ADR 073, amendment of 2026-12-07, the promotion rule).
--
-- The rule was written twice on the live path: settle_18's statement for a parent that succeeded,
-- promote_15 for a 'run' dependent whose parent died (through follow_parent_15). settle_19,
-- promote_19 and follow_parent_19 are those three with the rule taken from promoted_19, and
-- jobs_settle runs settle_19. promoted_19 is a plain SQL function of one expression, without a SET
-- clause (which would stop it): the planner inlines it into each update, so a promotion costs no
-- call per row and settle_19's statement stays the one statement of settle_18. Its body names
-- nothing of the schema (clock_timestamp is the server's), so it needs no search_path of its own.
--
-- Online: functions only, and jobs_settle re-pointed (a moment of jobs' lock at the migration's
-- commit, as migration 18 took); nothing is rewritten or read. Code of version 18 runs unchanged
-- against this schema: it calls follow_parent_15, which stays with promote_15, and a parent's end
-- runs the trigger, whose promotion decides as settle_18's did.

-- A dependent counting p_settled of its p_parents_left parents as finished: still 'waiting' while
-- others are left, else 'pending' if its run_at has come by the database's clock, or 'delayed'.
CREATE FUNCTION promoted_19(p_parents_left integer, p_settled integer, p_run_at timestamptz) RETURNS text
LANGUAGE sql
VOLATILE
AS $$
    SELECT CASE WHEN p_parents_left > p_settled THEN 'waiting'
                WHEN p_run_at <= clock_timestamp() THEN 'pending' ELSE 'delayed' END
$$;

-- promote_15, its state from promoted_19.
CREATE FUNCTION promote_19(p_children bigint[]) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_woken integer;
BEGIN
    WITH promoted AS (
        UPDATE jobs AS j
           SET parents_left = j.parents_left - c.n,
               state = promoted_19(j.parents_left, c.n, j.run_at)
          FROM (SELECT id, count(*)::integer AS n, 'waiting'::text AS waiting
                  FROM unnest(p_children) AS ids(id) GROUP BY id) AS c
         WHERE j.id = c.id AND j.state = c.waiting
        RETURNING j.queue, j.state)
    SELECT count(pg_notify(channel(current_schema(), q.queue), '')) INTO v_woken
      FROM (SELECT DISTINCT queue FROM promoted WHERE state = 'pending') AS q;
END
$$;

-- follow_parent_15, a 'run' dependent promoted by promote_19.
CREATE FUNCTION follow_parent_19(p_child bigint, p_parent bigint, p_died_at timestamptz) RETURNS void
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
        PERFORM promote_19(ARRAY[p_child]);
    END IF;
END
$$;

-- settle_18, its promotion's state from promoted_19 and a death followed by follow_parent_19.
CREATE FUNCTION settle_19() RETURNS trigger
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
               state = promoted_19(j.parents_left, c.n, j.run_at)
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
        PERFORM follow_parent_19(v_child, OLD.id, coalesce(v_died_at, clock_timestamp()));
    END LOOP;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS jobs_settle ON jobs;
CREATE TRIGGER jobs_settle AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION settle_19();
