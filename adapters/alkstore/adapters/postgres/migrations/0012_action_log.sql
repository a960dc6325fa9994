-- alkstore schema: the action log, what operators did through a console (ADR 068).
--
-- Online: a new table, nothing else; no table an earlier version created is touched. Code of the
-- version before runs unchanged against this schema: it never reads or writes the new table.

-- One row per action: its id (the log's order), when, who (the console's role and the client's
-- address), what, on what and what came of it. Rows are only appended and read newest first, one
-- range of the primary key; core bounds each text's length before it is written.
CREATE TABLE action_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL,
    role text NOT NULL,
    address text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    outcome text NOT NULL
);
