-- The claim of a queue with a rate limit (ADR 070): the claim of claim.sql, always read in full
-- (no cursor), with every candidate's start counted by rate_start_14 before it is taken. A queue
-- without a limit never runs these: its claims are claim.sql's, unchanged.

-- fragment: claimed_rated
-- The CTE "claimed" of a limited queue: the ready jobs in claim order, those of a key already
-- limited as of the statement's snapshot left out, each locked as it is read and taken (leased
-- by claim.sql's lease_taken) if rate_start_14 lets it start, until the claim has what allowed
-- leaves. The reads stop there (the outer LIMIT pulls no further), so no start is counted for a
-- job the claim does not take, and a key's later jobs passed over in this claim are read on to
-- the next key's.
claimed AS (
    {lease_taken}
    WHERE id = ANY(ARRAY(
        SELECT c.id FROM (
            SELECT id, rate_key FROM {s}.jobs
            WHERE queue = (SELECT %(queue)s::text) AND state = 'pending' AND run_at <= %(now)s
              AND (expires_at IS NULL OR expires_at > %(now)s) AND NOT (SELECT needed FROM sweep)
              AND (rate_key IS NULL OR %(key_every_us)s::bigint IS NULL OR NOT EXISTS (
                   SELECT FROM {s}.rate_starts AS r
                   WHERE r.queue = jobs.queue AND r.key = jobs.rate_key AND r.next_at > %(now)s))
            ORDER BY {order_claim}
            FOR UPDATE SKIP LOCKED) AS c
        WHERE {s}.rate_start_14(%(queue)s, c.rate_key, %(now)s, %(every_us)s, %(key_every_us)s)
        LIMIT (SELECT n FROM allowed)))
    RETURNING {job_columns})

-- name: claim_rated
-- The claimed jobs (swept false), or one row of NULLs with swept true when it swept instead.
WITH {sweep_needed_full},
swept AS MATERIALIZED ({sweep_call} FROM sweep WHERE needed),
{allowed},
{claimed_rated}
{claim_rows}

-- fragment: rated_due(queue)
-- When the first ready job of a limited queue (its queues row c) may start: the soonest, over
-- its ready jobs, of its run_at or, later, its key's next start (with a key_rate); then no sooner
-- than the queue's own next start (with a rate). NULL when it has no ready job. A scan of the
-- queue's ready jobs, which only an idle worker of a limited queue reads.
(SELECT greatest(m.at, (SELECT next_at FROM {s}.rate_starts
                        WHERE queue = {queue} AND key = '' AND c.rate_per_us IS NOT NULL))
 FROM (SELECT min(greatest(j.run_at, (SELECT next_at FROM {s}.rate_starts AS r
                                      WHERE r.queue = j.queue AND r.key = j.rate_key
                                        AND c.key_rate_per_us IS NOT NULL))) AS at
       FROM {s}.jobs AS j WHERE j.queue = {queue} AND j.state = 'pending') AS m
 WHERE m.at IS NOT NULL)
