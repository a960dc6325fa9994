-- Storage upkeep (ADR 023): the statistics a worker's maintenance reads, and its VACUUM.

-- name: table_stats
-- The schema's tables with the server's estimates of their rows, whether autovacuum covers
-- them, and whether this role may VACUUM them (PostgreSQL 15: the table's owner, the database's
-- owner or a superuser; the privileges of a role's roles count). Each table is found by its name
-- (an index probe of pg_class) and counted by the statistics functions: the pg_stat views and a
-- scan of pg_class read every table of the database, which costs a catalog's worth of pages
-- where many schemas come and go.
SELECT t.name AS table, pg_catalog.pg_stat_get_live_tuples(c.oid) AS live_rows,
       pg_catalog.pg_stat_get_dead_tuples(c.oid) AS dead_rows,
       pg_catalog.current_setting('autovacuum')::boolean
       AND coalesce((SELECT o.option_value::boolean FROM pg_catalog.pg_options_to_table(c.reloptions) AS o
                     WHERE o.option_name = 'autovacuum_enabled'), true) AS autovacuum,
       pg_catalog.pg_has_role(c.relowner, 'USAGE')
       OR pg_catalog.pg_has_role((SELECT d.datdba FROM pg_catalog.pg_database AS d
                                  WHERE d.datname = pg_catalog.current_database()), 'USAGE')
       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) AS vacuumable
FROM unnest(%(tables)s::text[]) AS t(name)
JOIN pg_catalog.pg_class AS c ON c.oid = pg_catalog.to_regclass(
    pg_catalog.quote_ident(%(schema)s) || '.' || pg_catalog.quote_ident(t.name))
ORDER BY t.name COLLATE "C"

-- name: vacuum
-- One table of the schema ({table}, composed per call): never waiting for a lock another vacuum
-- holds, and always cleaning the indexes (the claim reads their dead entries).
VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {s}.{table}
