-- alkstore schema, version 1: jobs, the dead-letter table, leases, schedules, and the
-- functions that give claims, lock acquisition and channel names one round trip each.
--
-- The migrator runs this file inside one transaction with `search_path` set to the target
-- schema (and an advisory lock held), so every object is created unqualified, and every
-- function pins that schema with `SET search_path FROM CURRENT`. Nothing here knows the
-- schema's name, and no value is ever formatted into the text.

-- Job ids: one sequence for live and dead jobs, so an id names one job for ever.
CREATE SEQUENCE job_ids AS bigint;

-- Live jobs: pending (waiting for run_at) or running (leased to worker_id until lease_until).
-- `attempts` counts claims against max_attempts (requeue_dead resets it); `lease` is the
-- fencing token of ack/retry/bury/heartbeat: it grows with every claim and is never reset, so
-- a stale holder cannot match a later lease. last_error is UTF-8 bytes (surrogates passed
-- through) so any Python string round-trips exactly, NUL too.
CREATE TABLE jobs (
    id           bigint PRIMARY KEY DEFAULT nextval('job_ids'),
    queue        text COLLATE "C" NOT NULL,
    payload      bytea NOT NULL,
    state        text NOT NULL CHECK (state IN ('pending', 'running')),
    priority     integer NOT NULL,
    run_at       timestamptz NOT NULL,
    expires_at   timestamptz,
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    last_error   bytea,
    schedule     text COLLATE "C",
    boundary     timestamptz,
    enqueued_at  timestamptz NOT NULL,
    worker_id    text,
    lease_until  timestamptz,
    lease        bigint NOT NULL DEFAULT 0 CHECK (lease >= 0),
    CHECK ((state = 'running') = (worker_id IS NOT NULL AND lease_until IS NOT NULL))
);
ALTER SEQUENCE job_ids OWNED BY jobs.id;

-- The claim walks this index in its sort order: best pending job of a queue first.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
-- The lease sweep: running jobs of a queue whose lease lapsed.
CREATE INDEX jobs_lease ON jobs (queue, lease_until) WHERE state = 'running';
-- The expiry sweep: pending jobs of a queue past their expires_at.
CREATE INDEX jobs_expiry ON jobs (queue, expires_at) WHERE state = 'pending' AND expires_at IS NOT NULL;

-- The dead-letter table: a dead job keeps every field it had, plus the time of death.
CREATE TABLE dead_jobs (
    id           bigint PRIMARY KEY,
    queue        text COLLATE "C" NOT NULL,
    payload      bytea NOT NULL,
    priority     integer NOT NULL,
    run_at       timestamptz NOT NULL,
    expires_at   timestamptz,
    attempts     integer NOT NULL,
    max_attempts integer NOT NULL,
    last_error   bytea NOT NULL,
    schedule     text COLLATE "C",
    boundary     timestamptz,
    enqueued_at  timestamptz NOT NULL,
    lease        bigint NOT NULL,
    died_at      timestamptz NOT NULL
);
CREATE INDEX dead_jobs_queue ON dead_jobs (queue, died_at);

-- Leases ("locks"): a token per acquisition, from a sequence, so tokens only grow.
CREATE SEQUENCE lock_tokens AS bigint;
CREATE TABLE locks (
    name       text COLLATE "C" PRIMARY KEY,
    owner      text NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Schedules: `expires_us` is ScheduleOpts.expires in whole microseconds, stored exactly.
CREATE TABLE schedules (
    name          text COLLATE "C" PRIMARY KEY,
    spec          text NOT NULL,
    interval_s    integer NOT NULL CHECK (interval_s > 0),
    queue         text COLLATE "C" NOT NULL,
    payload       bytea NOT NULL,
    priority      integer,
    max_attempts  integer CHECK (max_attempts >= 1),
    expires_us    bigint CHECK (expires_us > 0),
    next_boundary timestamptz NOT NULL
);
CREATE INDEX schedules_next_boundary ON schedules (next_boundary);

-- The LISTEN/NOTIFY channel of a queue: a fixed prefix and a hash of schema and queue, so any
-- valid queue name (any length, any character) maps to a short, safe identifier of its own
-- schema. The schema is an argument (not current_schema()) and the function has no SET
-- clause, so PostgreSQL inlines it into the statements that notify.
CREATE FUNCTION channel(p_schema text, p_queue text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT 'alkstore_' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.length(p_schema)::text || ':' || p_schema || ':' || p_queue, 'UTF8')), 'hex'), 40)
$$;

-- LISTEN on a queue's channel (quoted as an identifier); effective when the statement commits.
CREATE FUNCTION listen(p_schema text, p_queue text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    EXECUTE format('LISTEN %I', channel(p_schema, p_queue));
END
$$;

-- `n` fresh job ids in increasing order (a tick numbers its fires before inserting them).
CREATE FUNCTION next_job_ids(p_count integer) RETURNS SETOF bigint
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    SELECT nextval('job_ids') FROM generate_series(1, p_count) ORDER BY 1
$$;

-- The claim's sweeps, in the port's order. They skip rows another transaction holds (that
-- transaction decides their fate), so concurrent claimers never wait on, or deadlock with,
-- each other.
CREATE FUNCTION sweep(
    p_queue text,
    p_now timestamptz,
    p_lease_expired_error bytea,
    p_job_expired_error bytea
) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    -- 1. Lapsed leases on their last attempt: dead.
    WITH lapsed AS (
        DELETE FROM jobs WHERE id IN (
            SELECT id FROM jobs
             WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now
               AND attempts >= max_attempts
             FOR UPDATE SKIP LOCKED)
        RETURNING *
    )
    INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                           last_error, schedule, boundary, enqueued_at, lease, died_at)
    SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
           p_lease_expired_error, schedule, boundary, enqueued_at, lease, p_now
      FROM lapsed;

    -- 2. Other lapsed leases: pending again, worker and lease cleared.
    UPDATE jobs SET state = 'pending', worker_id = NULL, lease_until = NULL
     WHERE id IN (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now
           AND attempts < max_attempts
         FOR UPDATE SKIP LOCKED);

    -- 3. Pending jobs past their expiry: dead.
    WITH expired AS (
        DELETE FROM jobs WHERE id IN (
            SELECT id FROM jobs
             WHERE queue = p_queue AND state = 'pending' AND expires_at <= p_now
             FOR UPDATE SKIP LOCKED)
        RETURNING *
    )
    INSERT INTO dead_jobs (id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
                           last_error, schedule, boundary, enqueued_at, lease, died_at)
    SELECT id, queue, payload, priority, run_at, expires_at, attempts, max_attempts,
           p_job_expired_error, schedule, boundary, enqueued_at, lease, p_now
      FROM expired;
END
$$;

-- Claim: sweep the queue if it needs it, then lease its best pending job (see
-- alkstore.engine.Engine.claim).
CREATE FUNCTION claim(
    p_queue text,
    p_worker text,
    p_now timestamptz,
    p_lease_until timestamptz,
    p_lease_expired_error bytea,
    p_job_expired_error bytea
) RETURNS SETOF jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    -- A cheap look first: most claims have nothing to sweep. Each probe is a range scan of a
    -- partial index that stops at the first hit (ORDER BY + LIMIT keep the plan an index scan
    -- even when generic, and the range skips the entries of acked jobs not yet vacuumed).
    IF (SELECT lease_until FROM jobs
         WHERE queue = p_queue AND state = 'running' AND lease_until <= p_now
         ORDER BY lease_until LIMIT 1) IS NOT NULL
       OR (SELECT expires_at FROM jobs
            WHERE queue = p_queue AND state = 'pending' AND expires_at <= p_now
            ORDER BY expires_at LIMIT 1) IS NOT NULL THEN
        PERFORM sweep(p_queue, p_now, p_lease_expired_error, p_job_expired_error);
    END IF;

    -- The best runnable job: priority desc, run_at, id; a job another claimer holds is skipped.
    RETURN QUERY
    UPDATE jobs
       SET state = 'running', attempts = attempts + 1, lease = lease + 1,
           worker_id = p_worker, lease_until = p_lease_until
     WHERE id = (
        SELECT id FROM jobs
         WHERE queue = p_queue AND state = 'pending' AND run_at <= p_now
           AND (expires_at IS NULL OR expires_at > p_now)
         ORDER BY priority DESC, run_at, id
         LIMIT 1
         FOR UPDATE SKIP LOCKED)
    RETURNING *;
END
$$;

-- Take the lease `p_name` for `p_owner` (see alkstore.engine.Engine.try_lock): a free or
-- lapsed lease gets a new token from the sequence; the owner re-taking a lease it holds
-- keeps its token; a lease another owner holds returns no row. A token is drawn only when
-- one is issued, so refused attempts and extensions leave the sequence alone.
CREATE FUNCTION try_lock(p_name text, p_owner text, p_now timestamptz, p_expires_at timestamptz)
RETURNS SETOF locks
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_taken boolean;
BEGIN
    LOOP
        RETURN QUERY
        UPDATE locks
           SET token = CASE WHEN expires_at > p_now THEN token ELSE nextval('lock_tokens') END,
               owner = p_owner,
               expires_at = p_expires_at
         WHERE name = p_name AND (expires_at <= p_now OR owner = p_owner)
        RETURNING *;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT expires_at > p_now AND owner <> p_owner INTO v_taken FROM locks WHERE name = p_name;
        IF FOUND THEN
            IF v_taken THEN
                RETURN;
            END IF;
            CONTINUE;  -- released, lapsed or ours since the update looked: look again
        END IF;
        RETURN QUERY
        INSERT INTO locks (name, owner, token, expires_at)
        VALUES (p_name, p_owner, nextval('lock_tokens'), p_expires_at)
        ON CONFLICT (name) DO NOTHING
        RETURNING *;
        IF FOUND THEN
            RETURN;
        END IF;
        -- A concurrent acquisition inserted the row first: look again.
    END LOOP;
END
$$;
