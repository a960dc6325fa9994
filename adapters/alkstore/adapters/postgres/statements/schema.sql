-- The schema itself: its version and migrations, the session settings every connection takes,
-- and what an application role is granted (ADR 010, ADR 019). How these files are read:
-- _sql.py's opening comment.

-- -- schema and migrations ------------------------------------------------------------------

-- name: version_table_exists
SELECT to_regclass(quote_ident(%(schema)s) || '.schema_version') IS NOT NULL

-- name: schema_version
SELECT coalesce(max(version), 0) FROM {s}.schema_version

-- name: migration_lock
SELECT pg_advisory_xact_lock(%(key)s)

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {s}

-- name: create_version_table
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())

-- name: use_schema
SET LOCAL search_path TO {s}

-- name: record_version
INSERT INTO {s}.schema_version (version, name) VALUES (%(version)s, %(name)s)

-- name: lock_exclusive
-- A table the pending migrations lock against writes and later exclusively ({table}, composed per
-- call), locked exclusively before the first of them: no lock of theirs is raised midway
-- (_migrations.exclusive_first says why).
LOCK TABLE {s}.{table} IN ACCESS EXCLUSIVE MODE

-- -- sessions ---------------------------------------------------------------------------------

-- name: use_utc
SET TIME ZONE 'UTC'

-- name: server_time
SELECT clock_timestamp() AS now

-- -- application roles (ADR 019) --------------------------------------------------------------

-- name: application_roles
-- The roles that may write the jobs table, its owner aside: the schema's application roles,
-- whose grants every migration renews (the catalog remembers them; no table of alkstore's).
SELECT r.rolname FROM pg_catalog.pg_class AS c
CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
JOIN pg_catalog.pg_roles AS r ON r.oid = a.grantee
WHERE c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident(%(schema)s) || '.jobs')
  AND a.privilege_type = 'INSERT' AND a.grantee <> c.relowner
ORDER BY r.rolname

-- name: data_tables
-- The tables an application role reads and writes: every table of the schema but its version.
SELECT c.relname FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_version'
ORDER BY c.relname

-- What an application role needs on the schema, granted by migrate (_sql.grants): to use the
-- schema, read and write its tables (read only the version table), draw from its sequences and
-- run its functions. {role} and {tables} are identifiers, composed per call.

-- name: grant_schema
GRANT USAGE ON SCHEMA {s} TO {role}

-- name: grant_tables
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {tables} TO {role}

-- name: grant_version_table
GRANT SELECT ON TABLE {s}.schema_version TO {role}

-- name: grant_sequences
GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {role}

-- name: grant_functions
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {role}
