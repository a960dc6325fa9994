-- alkstore schema, version 16: runs, run time and pickup latency per minute, queue and task (ADR 075).
--
-- Online: a new table, nothing else; no table an earlier version created is touched. Code of
-- version 15 runs unchanged against this schema: it never reads or writes the new table.

-- One row per minute, queue and task (empty: jobs without a task) in which a worker reported runs
-- that ended: done and failed as in throughput, and the runs' summed run time and pickup latency
-- (claim instant minus run_at), in ms; the dashboard divides by the runs for the means. Keyed like
-- throughput, minute first: a chart's range and the prune (7 days) are each one range of the key.
CREATE TABLE task_figures (
    minute timestamptz NOT NULL,
    queue text COLLATE "C" NOT NULL,
    task text COLLATE "C" NOT NULL,
    done bigint NOT NULL CHECK (done >= 0),
    failed bigint NOT NULL CHECK (failed >= 0),
    run_ms double precision NOT NULL CHECK (run_ms >= 0),
    latency_ms double precision NOT NULL CHECK (latency_ms >= 0),
    PRIMARY KEY (minute, queue, task)
) WITH (fillfactor = 50);
