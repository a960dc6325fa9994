-- alkstore schema, version 7: the kept outcomes of jobs that succeeded (ADR 042).
--
-- Online: a new table with its indexes, and one nullable column on each of jobs and queues
-- (catalogue only: no rewrite, no scan; the ACCESS EXCLUSIVE it takes on jobs lasts until the
-- migration commits, which is a moment). Code of version 6 runs unchanged against this schema:
-- it never reads or writes the new columns and table.

-- -- jobs --------------------------------------------------------------------------------------

-- The failed attempts of a job whose queue keeps results, as core encoded them (oldest first):
-- appended by retry, copied into the job's result by its ack. NULL for every other job.
ALTER TABLE jobs ADD COLUMN attempt_log bytea[];

-- -- queues ------------------------------------------------------------------------------------

-- How long the outcome of each job of the queue that succeeds is kept (NULL: not kept).
ALTER TABLE queues ADD COLUMN keep_results_us bigint CHECK (keep_results_us > 0);

-- -- results -----------------------------------------------------------------------------------

-- One row per job that succeeded while its queue kept results, inserted by the statement that
-- deletes the job (so the job row leaves as every acked one does: its ordering key's next job is
-- promoted and its unique key freed, ADR 031 and 032), deleted once keep_until has passed.
CREATE TABLE results (
    id bigint PRIMARY KEY,
    queue text COLLATE "C" NOT NULL,
    payload bytea NOT NULL,
    task text,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz NOT NULL,
    keep_until timestamptz NOT NULL,
    worker_id text,
    result bytea NOT NULL,
    attempt_log bytea[]
);

-- A queue's results, newest first (the listing); and the soonest to expire (the purge).
CREATE INDEX results_queue ON results (queue, finished_at DESC, id DESC);
CREATE INDEX results_expiry ON results (keep_until);
