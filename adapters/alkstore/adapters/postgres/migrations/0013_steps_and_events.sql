-- alkstore schema: resumable steps, durable sleep and events (ADR 069).
--
-- Online: three new tables, nothing else; no table an earlier version created is touched. Code of
-- the version before runs unchanged against this schema: it never reads or writes the new tables.

-- A job's finished steps: one row per (job, name), its result as core encoded it. Written fenced
-- (the job must be running under the writer's fence, read under a key-share lock on the job) and
-- deleted by a worker's upkeep once the job is stored no more (no ack pays for it).
CREATE TABLE steps (
    job_id bigint NOT NULL,
    name text COLLATE "C" NOT NULL,
    result bytea NOT NULL,
    at timestamptz NOT NULL,
    PRIMARY KEY (job_id, name)
);

-- What a sleeping job waits for: the instant it is due again and the event that wakes it sooner.
-- Cleared when the job runs again (its first step) or when its event is emitted.
CREATE TABLE waits (
    job_id bigint PRIMARY KEY,
    until timestamptz NOT NULL,
    event text COLLATE "C"
);
CREATE INDEX waits_event ON waits (event) WHERE event IS NOT NULL;

-- Emitted events: the first emit of a name, kept until expires_at; an emit after that replaces it.
CREATE TABLE events (
    name text COLLATE "C" PRIMARY KEY,
    payload bytea NOT NULL,
    at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX events_expiry ON events (expires_at);
