-- alkstore schema, version 17: the gaps ADR 073 and ADR 070 left on PostgreSQL (ADR 077).
--
-- A waiting job with an expiry expires while it waits, as on the other engines: sweep_17 is
-- sweep_11 and, when the claim asks (a full claim's probe: every minute or so per queue), the
-- burial of the queue's waiting jobs past their expiry, read through jobs_waiting (no index is
-- built). A dead job keeps its rate_key and its on_parent_failure: new nullable columns of
-- dead_jobs, filled by a trigger on the job's delete (only for a row that has either), so no
-- burial path needs a new function. A requeued dead dependent keeps its rows of job_dependencies
-- (the engine links it again to its parents as they are then), where its purge still drops them.
--
-- Online: two nullable columns (catalogue only), three new functions, a new trigger and one
-- replaced (on dead_jobs, in the migration's transaction); no index is built, no row is
-- rewritten. Code of version 16 runs unchanged against this schema: it calls sweep_11, which
-- stays, never reads the new columns, and its requeue (which sets no on_parent_failure) still
-- drops the requeued job's links.

ALTER TABLE dead_jobs
    ADD COLUMN rate_key text COLLATE "C",
    ADD COLUMN on_parent_failure text;

-- A job deleted with a rate_key or a policy hands them to its dead row, if the delete moved it to
-- dead_jobs (an after-row trigger runs once the statement is done, so it sees the row the burial
-- inserted); an ack finds no dead row and changes nothing.
CREATE FUNCTION keep_on_death_17() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    UPDATE dead_jobs SET rate_key = OLD.rate_key, on_parent_failure = OLD.on_parent_failure WHERE id = OLD.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_keep_on_death AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.rate_key IS NOT NULL OR OLD.on_parent_failure IS NOT NULL)
    EXECUTE FUNCTION keep_on_death_17();

-- Deleted dead jobs take their rows of job_dependencies, but for one requeued as a dependent (live
-- again with its policy: the requeue links it again); an after-statement trigger sees the requeue's
-- insert.
CREATE FUNCTION unlink_dead_17() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM job_dependencies AS d USING gone
     WHERE d.child = gone.id
       AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = gone.id AND j.on_parent_failure IS NOT NULL);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS dead_jobs_unlink ON dead_jobs;
CREATE TRIGGER dead_jobs_unlink AFTER DELETE ON dead_jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION unlink_dead_17();

-- sweep_11, and with p_waiting the waiting jobs (behind their parents or their ordering key) past
-- their expiry buried as expired, as any pending job: their dependents follow their policies.
CREATE FUNCTION sweep_17(
    p_queue text,
    p_now timestamptz,
    p_lease_expired_error bytea,
    p_job_expired_error bytea,
    p_waiting boolean
) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    PERFORM sweep_11(p_queue, p_now, p_lease_expired_error, p_job_expired_error);
    IF NOT p_waiting THEN
        RETURN;
    END IF;
    SELECT array_agg(id) INTO v_ids FROM (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'waiting' AND expires_at <= p_now
         FOR UPDATE SKIP LOCKED) AS expired;
    IF v_ids IS NOT NULL THEN
        PERFORM bury_10(v_ids, NULL, array_fill(p_job_expired_error, ARRAY[cardinality(v_ids)]), NULL,
                        array_fill(NULL::bytea, ARRAY[cardinality(v_ids)]), p_now);
    END IF;
END
$$;
