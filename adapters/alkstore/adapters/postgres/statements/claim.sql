-- The claim, in one statement: a look for anything to sweep in the queue (each probe a range
-- scan of a partial index that stops at the first hit), then the best ready jobs, in the claim
-- order core declares (alkstore.engine.CLAIM_ORDER, composed as {order_claim}). Most claims
-- find nothing to sweep and lease the jobs here. Otherwise the statement runs the sweep and
-- leases nothing (its snapshot cannot see what the sweep did), and the engine runs it again
-- without the probe. ack_and_claim is the same claim after the acks of what a worker finished.
-- A claim reads the ready jobs either from the engine's cursor (ADR 061: per priority band, from
-- a lower bound on (run_at, id), so that it does not walk the dead entries the jobs claimed before
-- it left at the index's left end; claim, ack_and_claim) or from the left end of jobs_claim (the
-- full claims: claim_full, ack_and_claim_full), each statement with only its own read.

-- name: lease_probe
-- The claim's look for a lapsed lease in the queue: jobs_lease from the instant the engine's
-- last probe of the queue looked up to (probed_after; the oldest instant on a full probe, ADR
-- 061) up to now. A statement of its own too, for inspecting its cost
-- (bench/churn.py explains it).
SELECT lease_until FROM {s}.jobs
WHERE queue = (SELECT %(queue)s::text) AND state = 'running'
  AND lease_until >= (SELECT %(probed_after)s::timestamptz) AND lease_until <= %(now)s
ORDER BY lease_until LIMIT 1

-- fragment: sweep_needed
-- The CTE "sweep" of a claim from the cursor: whether the claim (when asked to probe) finds the
-- queue's lapsed leases or expired or due-delayed jobs to sweep first ({sweep_looks}).
sweep AS MATERIALIZED (SELECT %(probe)s AND ({sweep_looks}) AS needed)

-- fragment: sweep_needed_full
-- The CTE "sweep" of a full claim: the looks of a claim from the cursor, and one for waiting jobs
-- past their expiry too (through jobs_waiting, every waiting job of the queue read: once per full
-- claim, ADR 077).
sweep AS MATERIALIZED (
    SELECT %(probe)s AND (
        {sweep_looks}
        OR EXISTS (
            SELECT 1 FROM {s}.jobs
            WHERE queue = (SELECT %(queue)s::text) AND state = 'waiting' AND expires_at <= %(now)s)) AS needed)

-- fragment: sweep_looks
-- The looks of every claim's sweep (each probe a range scan of a partial index that stops at the
-- first hit): a lapsed lease ({lease_probe}), an expired pending or delayed job, a due delayed job.
({lease_probe}) IS NOT NULL
OR (SELECT expires_at FROM {s}.jobs
    WHERE queue = (SELECT %(queue)s::text) AND state IN ('pending', 'delayed') AND expires_at <= %(now)s
    ORDER BY expires_at LIMIT 1) IS NOT NULL
OR (SELECT run_at FROM {s}.jobs
    WHERE queue = (SELECT %(queue)s::text) AND state = 'delayed' AND run_at <= %(now)s
    ORDER BY run_at LIMIT 1) IS NOT NULL

-- fragment: sweep_call
-- The sweep of the queue's lapsed leases and expired or due-delayed jobs, in one function call
-- (full: a full claim's, which also buries the waiting jobs past their expiry).
SELECT {s}.sweep_17(%(queue)s, %(now)s, %(lease_expired_error)s, %(job_expired_error)s, %(full)s)

-- fragment: lease_taken
-- How a claim leases the jobs it takes (its WHERE follows): running, one more attempt, the next
-- fence, held by the worker until now plus the job's visibility or the queue's lease. A claimed
-- job keeps its unique key only if it holds it while it runs. Every claim's UPDATE is this one.
UPDATE {s}.jobs SET state = 'running', attempts = attempts + 1, lease = lease + 1,
                    worker_id = %(worker)s, claimed_at = %(now)s,
                    unique_key = CASE WHEN unique_running THEN unique_key END,
                    lease_until = %(now)s + coalesce(visibility_us, %(lease_us)s) * interval '1 microsecond'

-- fragment: claimed
-- The CTE "claimed" of a claim from the cursor (ADR 061): the best ready jobs, leased
-- ({lease_taken}), unless the sweep is needed first; a claim of a queue with a global limit
-- (limited) takes no more than allowance_6 leaves. The limit and the queue are subqueries so that
-- no plan knows them: a custom plan that folded the limit looked cheaper than the generic one
-- (which guesses a tenth of the rows) on any table of some thousands of jobs, one that knew its
-- queue was empty looked cheaper than one for an average queue, and the server then planned the
-- claim anew at every call (ADR 049). So are the cursor's segments (a custom plan that knew there
-- were none looked cheaper) and where the lease probe starts.
-- The read cuts the claim order into segments of priorities (band_his to band_los), each read
-- from a lower bound on (run_at, id) ({claim_band}: an index range that starts there), and takes
-- the best of what they hold: the segments come highest priorities first and each reads in the
-- claim order, so the first rows of them in their order are the best, taken without a sort and
-- without reading the segments after the limit (ADR 061, amended "the segments in their order").
-- A priority band this engine claimed from starts at its cursor,
-- every other priority at its left end, so only a job behind a band's cursor is left for a full
-- claim ({claimed_full}), which the engine runs at least every claim_backstop seconds. The two
-- are statements of their own, each with its own generic plan: one statement with both reads
-- carried the other read's plan nodes at every run (ADR 061, amended 2026-12-07).
-- A segment's scan reads the rest of the leaf page it starts on, each entry checked against each
-- index key: "run_at <= now" is a filter (IS TRUE, which no index takes), checked on the rows
-- fetched only, not a sixth key on every entry (ADR 061, amended 2026-12-07 "the keys a page pays");
-- its now a subquery, so that no custom plan knows it (a custom plan that did looked cheaper).
claimed AS (
    {lease_taken}
    WHERE id = ANY(ARRAY(
        SELECT picked.id
        FROM unnest((SELECT %(band_his)s::integer[]), (SELECT %(band_los)s::integer[]),
                    (SELECT %(band_ats)s::timestamptz[]), (SELECT %(band_ids)s::bigint[]))
          WITH ORDINALITY AS b(band_hi, band_lo, band_at, band_id, segment)
        CROSS JOIN LATERAL (
            SELECT id, priority, run_at FROM {s}.jobs
            WHERE queue = (SELECT %(queue)s::text) AND state = 'pending' AND {claim_band}
              AND (run_at <= (SELECT %(now)s::timestamptz)) IS TRUE AND (expires_at IS NULL OR expires_at > %(now)s)
            ORDER BY {order_claim}
            LIMIT (SELECT n FROM allowed)
            FOR UPDATE SKIP LOCKED) AS picked
        WHERE NOT (SELECT needed FROM sweep)
        ORDER BY b.segment
        LIMIT (SELECT n FROM allowed)))
    RETURNING {job_columns})

-- fragment: claimed_full
-- The CTE "claimed" of a full claim: the best ready jobs from the left end of jobs_claim, leased
-- as a claim from the cursor leases them, the queue and the limit subqueries for the same reason.
claimed AS (
    {lease_taken}
    WHERE id = ANY(ARRAY(
        SELECT id FROM {s}.jobs
        WHERE queue = (SELECT %(queue)s::text) AND state = 'pending' AND run_at <= %(now)s
          AND (expires_at IS NULL OR expires_at > %(now)s)
          AND NOT (SELECT needed FROM sweep)
        ORDER BY {order_claim}
        LIMIT (SELECT n FROM allowed)
        FOR UPDATE SKIP LOCKED))
    RETURNING {job_columns})

-- fragment: allowed
-- The CTE "allowed": how many jobs the claim may take, computed once for every segment.
allowed AS MATERIALIZED (
    SELECT CASE WHEN %(limited)s THEN {s}.allowance_6(%(queue)s, %(now)s, %(limit)s) ELSE %(limit)s END AS n)

-- fragment: claim_rows
-- The rows of a claim: the claimed jobs (swept false), or one row of NULLs with swept true when
-- it swept instead.
SELECT {job_columns}, false AS swept FROM claimed
UNION ALL
SELECT {job_columns_as_null}, true FROM swept

-- name: claim
-- A claim from the engine's cursor (ADR 061): what a worker's wake runs.
WITH {sweep_needed},
swept AS MATERIALIZED ({sweep_call} FROM sweep WHERE needed),
{allowed},
{claimed}
{claim_rows}

-- name: claim_full
-- A full claim: the first claim of a queue, one after a reset, and the backstop's.
WITH {sweep_needed_full},
swept AS MATERIALIZED ({sweep_call} FROM sweep WHERE needed),
{allowed},
{claimed_full}
{claim_rows}

-- fragment: claim_follows
-- A condition true for every row, which sets the transaction's alkstore.claim_follows (before any
-- trigger of the statement runs: they run at its end). The ack of a pipelined ack and claim (ADR
-- 073) carries it: the settle trigger (settle_21) then leaves the notice for a dependent it made
-- ready to the claim that follows (claim_waking), which knows whether it took it.
(SELECT pg_catalog.set_config('alkstore.claim_follows', 'on', true)) = 'on'

-- fragment: woken
-- The CTE "woken" of a claim after an ack that carried claim_follows: a notice to the queue of each
-- dependent the ack made pending (the ids settle_21 added to the transaction's alkstore.promoted)
-- that this claim did not take, whatever it did instead (another queue, a sweep). The statement's
-- snapshot shows a job it claims as still pending, hence its ids left out by name. Nobody else can
-- take such a child before the transaction commits: the promotion holds its row lock. The children
-- are read by primary key: their state is compared as a subquery (as jobs.sql's running is), or a
-- plan could walk jobs_claim, every ready job of the table, and filter on the ids. Two children of
-- one queue send the same notice, which the server sends once per transaction.
woken AS MATERIALIZED (
    SELECT count(pg_notify({s}.channel(%(schema)s, queue), '')) AS notices FROM {s}.jobs
    WHERE id = ANY(string_to_array(nullif(pg_catalog.current_setting('alkstore.promoted', true), ''), ',')::bigint[])
      AND state = (SELECT 'pending'::text) AND id <> ALL(ARRAY(SELECT id FROM claimed)))

-- fragment: claim_rows_woken
-- The rows of a claim with woken: as claim_rows (woken's one row never matches, but the union makes
-- the CTE run).
{claim_rows}
UNION ALL
SELECT {job_columns_as_null}, false FROM woken WHERE notices < 0

-- name: claim_waking
-- The claim from the cursor of a pipelined ack and claim (ADR 073), after an ack that carried
-- claim_follows: as claim, and the notices of woken.
WITH {sweep_needed},
swept AS MATERIALIZED ({sweep_call} FROM sweep WHERE needed),
{allowed},
{claimed},
{woken}
{claim_rows_woken}

-- name: claim_waking_full
-- claim_waking with a full claim (a parent's ack resets its queue's cursor, so this is the usual one).
WITH {sweep_needed_full},
swept AS MATERIALIZED ({sweep_call} FROM sweep WHERE needed),
{allowed},
{claimed_full},
{woken}
{claim_rows_woken}

-- fragment: swept_after(acked)
-- The CTE "swept" of a claim after the acks of the CTE named (which returns their ids): an acked
-- job may have lapsed, so the sweep joins the finished acks before it calls the sweep function,
-- whose own statements then see those rows gone, and no row is changed twice.
swept AS MATERIALIZED ({sweep_call} FROM sweep, (SELECT count(*) FROM {acked}) AS finished WHERE needed)

-- fragment: claim_rows_after(acked)
-- The rows of a claim after acks: the acked ids come back as rows of their own (acked), the
-- claimed jobs and the sweep marker as in claim_rows.
SELECT {job_columns}, false AS swept, NULL::bigint AS acked FROM claimed
UNION ALL
SELECT {job_columns_as_null}, true, NULL FROM swept
UNION ALL
SELECT {job_columns_as_null}, false, id FROM {acked}

-- fragment: claim_after(acked)
-- The claim from the cursor after the acks of the CTE named.
{sweep_needed},
{swept_after: acked},
{allowed},
{claimed}
{claim_rows_after: acked}

-- fragment: claim_after_full(acked)
-- The full claim after the acks of the CTE named.
{sweep_needed_full},
{swept_after: acked},
{allowed},
{claimed_full}
{claim_rows_after: acked}

-- name: ack_and_claim
-- A claim from the cursor that first acks what a worker finished (fenced, as ack_many), in the
-- same statement and round trip. The acked rows are running, the claimed ones pending: the two
-- never touch one row.
WITH acked AS ({ack_many}),
{claim_after: acked}

-- name: ack_and_claim_full
-- ack_and_claim with a full claim.
WITH acked AS ({ack_many}),
{claim_after_full: acked}

-- name: soonest_due
-- What an idle worker waits for (ADR 044), in one read for all its queues: per queue, the first
-- ready job in claim order, the soonest delayed job and lease end; queues stored as paused are
-- left out. An expiry is never sooner than its job's run_at, so it adds nothing here. A queue
-- stored with a rate limit has its first ready job's start as its limits allow instead
-- ({rated_due}, ADR 070). The ready jobs are read as the queue's next wide claim reads them (ADR
-- 078: per segment of the claim order from its bound, band_queues naming each segment's queue; one
-- segment from the left end for a queue read in full), and the leases from where the
-- queue's last probe looked up to a little past it (probed_afters to leases_to, every lease when
-- read in full): under a pinned horizon neither walks the dead heads the claims and acks since
-- the pin left at the left ends.
SELECT min(due.at)
FROM unnest(%(queues)s::text[], %(probed_afters)s::timestamptz[], %(leases_to)s::timestamptz[])
  AS q(name, probed_after, leases_to)
LEFT JOIN {s}.queues AS c ON c.name = q.name
CROSS JOIN LATERAL (
    SELECT (SELECT min(first.run_at)
            FROM unnest(%(band_queues)s::text[], %(band_his)s::integer[], %(band_los)s::integer[],
                        %(band_ats)s::timestamptz[], %(band_ids)s::bigint[])
              AS b(band_queue, band_hi, band_lo, band_at, band_id)
            CROSS JOIN LATERAL (
                SELECT run_at FROM {s}.jobs WHERE queue = q.name AND state = 'pending' AND {claim_band}
                ORDER BY {order_claim} LIMIT 1) AS first
            WHERE b.band_queue = q.name AND c.rate_per_us IS NULL AND c.key_rate_per_us IS NULL)
    UNION ALL
    SELECT {rated_due: q.name} WHERE c.rate_per_us IS NOT NULL OR c.key_rate_per_us IS NOT NULL
    UNION ALL
    SELECT (SELECT run_at FROM {s}.jobs WHERE queue = q.name AND state = 'delayed' ORDER BY run_at LIMIT 1)
    UNION ALL
    SELECT (SELECT lease_until FROM {s}.jobs WHERE queue = q.name AND state = 'running'
            AND lease_until >= q.probed_after AND lease_until <= q.leases_to
            ORDER BY lease_until LIMIT 1)) AS due(at)
WHERE c.paused IS NOT TRUE
