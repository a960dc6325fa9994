-- alkstore schema, version 4: what operators inspect (ADR 020).
--
-- Inspection reads the jobs through the partial indexes that already exist (one per stored
-- state, each led by the queue) and dead jobs through dead_jobs_queue, so it adds no index
-- (and no trigger, no counter) to the jobs table: enqueue, claim and ack maintain exactly
-- what they maintained before. Function bodies never change once created (ADR 014).

-- Workers report themselves here every few seconds (an upsert by id) and delete their row
-- when they stop cleanly; a row whose seen_at is old belongs to a worker that stopped without
-- saying so. There is deliberately no index but the key: listing reads the whole (small)
-- table, and an unindexed seen_at lets every heartbeat be a HOT update.
CREATE TABLE workers (
    id          text COLLATE "C" PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    queues      text[] NOT NULL,
    concurrency integer NOT NULL,
    started_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL,
    running     bigint NOT NULL,
    processed   bigint NOT NULL,
    failed      bigint NOT NULL
);

-- The queues holding any job, live or dead: a loose index scan of each state's index (one
-- probe per queue and index), never a scan of the rows. STABLE: it reads, never writes. These
-- functions do a few index probes and short range scans, so neither JIT compilation nor
-- parallel workers (whose start-up alone costs more) ever pays off for them.
CREATE FUNCTION queues_4() RETURNS SETOF text
LANGUAGE sql STABLE ROWS 10
SET search_path FROM CURRENT
SET jit = off
SET max_parallel_workers_per_gather = 0
AS $$
    WITH RECURSIVE
    pending (queue) AS (
        SELECT min(queue) FROM jobs WHERE state = 'pending'
        UNION ALL
        SELECT (SELECT min(queue) FROM jobs WHERE state = 'pending' AND queue > pending.queue)
          FROM pending WHERE pending.queue IS NOT NULL),
    delayed (queue) AS (
        SELECT min(queue) FROM jobs WHERE state = 'delayed'
        UNION ALL
        SELECT (SELECT min(queue) FROM jobs WHERE state = 'delayed' AND queue > delayed.queue)
          FROM delayed WHERE delayed.queue IS NOT NULL),
    running (queue) AS (
        SELECT min(queue) FROM jobs WHERE state = 'running'
        UNION ALL
        SELECT (SELECT min(queue) FROM jobs WHERE state = 'running' AND queue > running.queue)
          FROM running WHERE running.queue IS NOT NULL),
    dead (queue) AS (
        SELECT min(queue) FROM dead_jobs
        UNION ALL
        SELECT (SELECT min(queue) FROM dead_jobs WHERE queue > dead.queue)
          FROM dead WHERE dead.queue IS NOT NULL)
    SELECT queue FROM pending WHERE queue IS NOT NULL
    UNION SELECT queue FROM delayed WHERE queue IS NOT NULL
    UNION SELECT queue FROM running WHERE queue IS NOT NULL
    UNION SELECT queue FROM dead WHERE queue IS NOT NULL
$$;

-- One queue's jobs by phase at p_now (see alkstore.engine.Engine.queue_counts), each count
-- stopping at p_cap (NULL: no cap), so its cost is bounded by the cap, not by the table.
-- A pending job is ready when its run_at <= p_now, whatever its stored state: a 'delayed' row
-- may be due (a claim's sweep promotes it) and a 'pending' one ahead of p_now (the clock
-- stepped back). The stored-pending rows are walked per priority band (a loose index scan of
-- jobs_claim), which gives each band's earliest run_at and its rows after p_now in a probe each.
-- Every capped count walks its state's index in the index's own order: the function's plan is
-- generic (its arguments unknown when planned), and without the order a LIMIT invites a
-- sequential scan that may read most of the table before it finds the cap's worth of rows.
CREATE FUNCTION queue_counts_4(p_queue text, p_now timestamptz, p_cap bigint)
RETURNS TABLE (ready bigint, delayed bigint, running bigint, dead bigint, oldest_ready timestamptz)
LANGUAGE sql STABLE ROWS 1
SET search_path FROM CURRENT
SET jit = off
SET max_parallel_workers_per_gather = 0
AS $$
    WITH RECURSIVE bands (priority) AS (
        SELECT max(priority) FROM jobs WHERE queue = p_queue AND state = 'pending'
        UNION ALL
        SELECT (SELECT max(priority) FROM jobs
                 WHERE queue = p_queue AND state = 'pending' AND priority < bands.priority)
          FROM bands WHERE bands.priority IS NOT NULL),
    heads AS (
        SELECT (SELECT run_at FROM jobs
                 WHERE queue = p_queue AND state = 'pending' AND priority = bands.priority
                 ORDER BY run_at LIMIT 1) AS run_at,
               (SELECT count(*) FROM (SELECT 1 FROM jobs
                 WHERE queue = p_queue AND state = 'pending' AND priority = bands.priority AND run_at > p_now
                 ORDER BY run_at LIMIT p_cap) AS ahead) AS ahead
          FROM bands WHERE bands.priority IS NOT NULL)
    SELECT
        least(p_cap,
              (SELECT count(*) FROM (SELECT 1 FROM jobs
                WHERE queue = p_queue AND state = 'pending' AND run_at <= p_now
                ORDER BY priority DESC, run_at, id LIMIT p_cap) AS n)
            + (SELECT count(*) FROM (SELECT 1 FROM jobs
                WHERE queue = p_queue AND state = 'delayed' AND run_at <= p_now ORDER BY run_at LIMIT p_cap) AS n)),
        least(p_cap,
              (SELECT coalesce(sum(ahead), 0) FROM heads)::bigint
            + (SELECT count(*) FROM (SELECT 1 FROM jobs
                WHERE queue = p_queue AND state = 'delayed' AND run_at > p_now ORDER BY run_at LIMIT p_cap) AS n)),
        (SELECT count(*) FROM (SELECT 1 FROM jobs
            WHERE queue = p_queue AND state = 'running' ORDER BY lease_until LIMIT p_cap) AS n),
        (SELECT count(*) FROM (SELECT 1 FROM dead_jobs WHERE queue = p_queue ORDER BY died_at LIMIT p_cap) AS n),
        (SELECT min(run_at) FROM (
            SELECT run_at FROM heads WHERE run_at <= p_now
            UNION ALL
            SELECT min(run_at) FROM jobs WHERE queue = p_queue AND state = 'delayed' AND run_at <= p_now) AS due)
$$;
