-- alkstore schema, version 9: the workers' runs done and failed per queue and minute (ADR 048).
--
-- Online: a new table, nothing else; no table an earlier version created is touched. Code of
-- version 8 runs unchanged against this schema: it never reads or writes the new table.

-- One row per queue and minute in which a worker reported runs that ended: the minute's start (UTC,
-- whole minutes) and the runs that succeeded and failed, added to by every reporting worker in the
-- statement that stores its report. The key leads with the minute: the dashboard reads the last
-- hour across queues and a worker's upkeep deletes the minutes past a day, each one range of it.
-- Reports update only the counts, which no index holds, so the updates stay on their page (HOT).
CREATE TABLE throughput (
    minute timestamptz NOT NULL,
    queue text COLLATE "C" NOT NULL,
    done bigint NOT NULL CHECK (done >= 0),
    failed bigint NOT NULL CHECK (failed >= 0),
    PRIMARY KEY (minute, queue)
) WITH (fillfactor = 50);
