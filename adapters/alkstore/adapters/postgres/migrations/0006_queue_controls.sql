-- alkstore schema, version 6: unique jobs, ordering keys, paused and limited queues, anchored
-- schedules and cancel requests for running jobs (ADRs 031-035).
--
-- No table is rewritten: every column is nullable or has a constant default. But ALTER TABLE
-- holds ACCESS EXCLUSIVE on jobs until the migration commits, and the two index builds each
-- read the whole table meanwhile, so on a deep jobs table this is not online (CHANGELOG.md).
-- Code of version 5 runs unchanged against this schema: it never writes the new columns, and
-- the functions it calls (sweep_3, bury_3, queue_counts_4) are kept.

-- -- jobs --------------------------------------------------------------------------------------

-- Keys compare byte by byte (COLLATE "C", as queue names do): a unique index must not depend on
-- the operating system's locale rules, which change with its upgrades.
ALTER TABLE jobs
    ADD COLUMN unique_key text COLLATE "C",
    ADD COLUMN unique_running boolean NOT NULL DEFAULT false,
    ADD COLUMN ordering_key text COLLATE "C",
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

ALTER TABLE dead_jobs ADD COLUMN ordering_key text COLLATE "C";

-- The holder of each unique key: enqueue's ON CONFLICT arbiter. A job holds its key while it
-- is pending, delayed or waiting; the claim clears it unless the job holds it while it runs.
CREATE UNIQUE INDEX jobs_unique ON jobs (queue, unique_key) WHERE unique_key IS NOT NULL;

-- The jobs of each ordering key, oldest first: whether a new job waits, and which one is next.
CREATE INDEX jobs_ordering ON jobs (queue, ordering_key, id) WHERE ordering_key IS NOT NULL;

-- -- queues ------------------------------------------------------------------------------------

ALTER TABLE queues
    ADD COLUMN concurrency integer CHECK (concurrency >= 1),
    ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- -- schedules ---------------------------------------------------------------------------------

ALTER TABLE schedules ADD COLUMN anchor timestamptz;

-- -- functions ---------------------------------------------------------------------------------

-- The advisory lock that serializes the enqueues and the promotions of one ordering key, held
-- until the transaction ends.
CREATE FUNCTION lock_ordering_key_6(p_schema text, p_queue text, p_key text) RETURNS void
LANGUAGE sql
AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(p_schema || chr(31) || p_queue || chr(31) || p_key, 6))
$$;

-- When a job of an ordering key leaves the table (acked, buried, cancelled, expired) the next
-- waiting job of its key becomes delayed at its run_at: the claim's sweep makes a due one
-- pending, whatever clock the engine runs on. Waiters on the queue are woken.
CREATE FUNCTION promote_6() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_next bigint;
BEGIN
    PERFORM lock_ordering_key_6(TG_TABLE_SCHEMA, OLD.queue, OLD.ordering_key);
    SELECT id INTO v_next FROM jobs
     WHERE queue = OLD.queue AND ordering_key = OLD.ordering_key AND state <> 'waiting'
     LIMIT 1;
    IF v_next IS NOT NULL THEN
        RETURN NULL;  -- the key still has its head
    END IF;
    SELECT id INTO v_next FROM jobs
     WHERE queue = OLD.queue AND ordering_key = OLD.ordering_key AND state = 'waiting'
     ORDER BY id LIMIT 1;
    IF v_next IS NOT NULL THEN
        UPDATE jobs SET state = 'delayed' WHERE id = v_next;
        PERFORM pg_notify(channel(TG_TABLE_SCHEMA, OLD.queue), '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_promote AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.ordering_key IS NOT NULL AND OLD.state <> 'waiting')
    EXECUTE FUNCTION promote_6();

-- Burying, as bury_3, except that a job whose cancel was requested is deleted, not buried (it
-- ends cancelled); the ordering key goes with the dead row.
CREATE FUNCTION bury_6(
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
                  j.task, j.trace, j.ordering_key, j.cancel_requested
    ),
    dead AS (
        INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                               last_error, last_traceback, schedule, boundary, enqueued_at, lease,
                               visibility_us, task, trace, ordering_key, died_at)
        SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
               error, traceback, schedule, boundary, enqueued_at, lease, visibility_us, task, trace,
               ordering_key, p_now
          FROM gone WHERE NOT cancel_requested
        RETURNING id
    )
    SELECT id FROM gone
$$;

-- The claim's sweep, as sweep_3, except that a lapsed lease whose cancel was requested ends
-- cancelled (deleted) and burials go through bury_6.
CREATE FUNCTION sweep_6(
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
        PERFORM bury_6(v_ids, NULL, array_fill(p_lease_expired_error, ARRAY[cardinality(v_ids)]), NULL, p_now);
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
        PERFORM bury_6(v_ids, NULL, array_fill(p_job_expired_error, ARRAY[cardinality(v_ids)]), NULL, p_now);
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

-- How many jobs a claim of a limited queue may take: what its stored concurrency leaves beside
-- its running jobs whose lease has not lapsed, at most p_limit. The queue's row is locked until
-- the claim's transaction ends, so limited claims of one queue count one after another; the
-- count runs after the lock, on a snapshot that sees the claims committed before it.
CREATE FUNCTION allowance_6(p_queue text, p_now timestamptz, p_limit integer) RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_concurrency integer;
    v_running integer;
BEGIN
    SELECT concurrency INTO v_concurrency FROM queues WHERE name = p_queue FOR UPDATE;
    IF v_concurrency IS NULL THEN
        RETURN p_limit;
    END IF;
    SELECT count(*) INTO v_running FROM jobs
     WHERE queue = p_queue AND state = 'running' AND lease_until > p_now;
    RETURN greatest(0, least(p_limit, v_concurrency - v_running));
END
$$;

-- Per queue, as queue_counts_4, with the waiting jobs (capped) and whether the queue is paused.
CREATE FUNCTION queue_counts_6(p_queue text, p_now timestamptz, p_cap bigint)
RETURNS TABLE (ready bigint, delayed bigint, running bigint, dead bigint, oldest_ready timestamptz,
               waiting bigint, paused boolean)
LANGUAGE sql STABLE ROWS 1
SET search_path FROM CURRENT
AS $$
    SELECT c.*,
           (SELECT count(*) FROM (SELECT 1 FROM jobs
             WHERE queue = p_queue AND state = 'waiting' LIMIT p_cap) AS n),
           coalesce((SELECT paused FROM queues WHERE name = p_queue), false)
      FROM queue_counts_4(p_queue, p_now, p_cap) AS c
$$;
