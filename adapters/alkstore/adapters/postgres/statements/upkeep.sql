-- Storage upkeep (ADR 023): the statistics a worker's maintenance reads, and its VACUUM.

-- name: table_stats
-- The schema's tables with the server's estimates of their rows, whether autovacuum covers
-- them, and whether this role may VACUUM them (PostgreSQL 15: the table's owner, the database's
-- owner or a superuser; the privileges of a role's roles count). Each table is found by its name
-- (an index probe of pg_class) and counted by the statistics functions: the pg_stat views and a
-- scan of pg_class read every table of the database, which costs a catalog's worth of pages
-- where many schemas come and go. The horizon is the oldest transaction id (by age) a VACUUM
-- of this database keeps dead rows for: another session's snapshot or transaction, a prepared
-- transaction, a replication slot (every role may read these); read once per statement. Where
-- none holds one, the oldest transaction running on the server (this statement's snapshot), which
-- moves on with the first commit after: a vacuum that left rows then was not held back by any.
SELECT t.name AS table, pg_catalog.pg_stat_get_live_tuples(c.oid) AS live_rows,
       pg_catalog.pg_stat_get_dead_tuples(c.oid) AS dead_rows,
       pg_catalog.current_setting('autovacuum')::boolean
       AND coalesce((SELECT o.option_value::boolean FROM pg_catalog.pg_options_to_table(c.reloptions) AS o
                     WHERE o.option_name = 'autovacuum_enabled'), true) AS autovacuum,
       pg_catalog.pg_has_role(c.relowner, 'USAGE')
       OR pg_catalog.pg_has_role((SELECT d.datdba FROM pg_catalog.pg_database AS d
                                  WHERE d.datname = pg_catalog.current_database()), 'USAGE')
       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) AS vacuumable,
       coalesce((SELECT h.xid::text FROM (
            SELECT a.backend_xmin AS xid FROM pg_catalog.pg_stat_activity AS a
            WHERE a.datname = pg_catalog.current_database() AND a.pid <> pg_catalog.pg_backend_pid()
            UNION ALL
            SELECT a.backend_xid FROM pg_catalog.pg_stat_activity AS a
            WHERE a.datname = pg_catalog.current_database() AND a.pid <> pg_catalog.pg_backend_pid()
            UNION ALL
            SELECT p.transaction FROM pg_catalog.pg_prepared_xacts AS p
            WHERE p.database = pg_catalog.current_database()
            UNION ALL
            SELECT s.xmin FROM pg_catalog.pg_replication_slots AS s
        ) AS h WHERE h.xid IS NOT NULL ORDER BY pg_catalog.age(h.xid) DESC LIMIT 1),
        pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text) AS horizon
FROM unnest(%(tables)s::text[]) AS t(name)
JOIN pg_catalog.pg_class AS c ON c.oid = pg_catalog.to_regclass(
    pg_catalog.quote_ident(%(schema)s) || '.' || pg_catalog.quote_ident(t.name))
ORDER BY t.name COLLATE "C"

-- name: vacuum
-- One table of the schema ({table}, composed per call): never waiting for a lock another vacuum
-- holds, always cleaning the indexes (the claim reads their dead entries), and never cutting the
-- table's empty tail, which needs the ACCESS EXCLUSIVE lock every claim and enqueue queues behind
-- (and a standby replays): a queue's table fills those pages again.
VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON, TRUNCATE OFF) {s}.{table}
