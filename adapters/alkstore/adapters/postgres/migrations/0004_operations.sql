-- alkstore schema, version 4: what operators inspect (ADR 020).
--
-- Inspection reads the jobs through the partial indexes that already exist (one per stored
-- state, each led by the queue) and dead jobs through dead_jobs_queue, so it adds no index
-- to the jobs table: enqueue, claim and ack maintain exactly what they maintained before.

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
