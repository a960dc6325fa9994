-- alkstore schema, version 11: a job the claim's sweep buries (its last lease lapsed, or it
-- expired) keeps its attempt log, as one buried by its holder does since version 10 (ADR 064).
--
-- Online: one new function, nothing else. Code of version 10 runs unchanged against this schema:
-- its claims call sweep_6, which stays (a job it buries keeps no attempt log, as before).

-- The claim's sweep, as sweep_6, except that burials go through bury_10, so the dead row keeps the
-- job's attempt log (the lapsed or expired attempt itself adds no entry: no holder reported it).
CREATE FUNCTION sweep_11(
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
    DELETE FROM jobs
     WHERE id IN (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now AND cancel_requested
         FOR UPDATE SKIP LOCKED);

    SELECT array_agg(id) INTO v_ids FROM (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now AND attempts >= max_attempts
         FOR UPDATE SKIP LOCKED) AS lapsed;
    IF v_ids IS NOT NULL THEN
        PERFORM bury_10(v_ids, NULL, array_fill(p_lease_expired_error, ARRAY[cardinality(v_ids)]), NULL,
                        array_fill(NULL::bytea, ARRAY[cardinality(v_ids)]), p_now);
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
        PERFORM bury_10(v_ids, NULL, array_fill(p_job_expired_error, ARRAY[cardinality(v_ids)]), NULL,
                        array_fill(NULL::bytea, ARRAY[cardinality(v_ids)]), p_now);
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
