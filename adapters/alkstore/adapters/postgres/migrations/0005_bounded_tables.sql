-- alkstore schema, version 5: the jobs table's own autovacuum trigger, so churn leaves it flat (ADR 023).
--
-- Every claimed and acked job leaves two dead row versions and a dead entry in each index it
-- was in, at the end where every claim starts reading jobs_claim and where the lease probe
-- reads jobs_lease; only a vacuum reclaims them. The server's default trigger (50 dead rows
-- plus a fifth of the live ones) waits for a backlog-sized pile and then vacuums at autovacuum's
-- throttled pace. The jobs table asks for a vacuum after a fixed number of dead rows, whatever
-- its depth, unthrottled (a vacuum of a churning queue table is short and should end before
-- the next pile). These storage parameters count only where the server's autovacuum runs:
-- PostgreSQL starts no autovacuum (wraparound aside) when `autovacuum = off`, whatever a table
-- says, so workers vacuum such a table themselves (alkstore._maintenance).
--
-- No fillfactor: no update of a job is a HOT update (a claim changes `state`, which every
-- partial index's predicate reads, and `lease_until`, which jobs_lease holds; a heartbeat
-- changes `lease_until`), so space kept free on a page would only make the heap larger.
-- Nothing else changes: no function, index or column, so code of version 4 runs unchanged
-- against this schema. Setting these parameters takes no lock that blocks reads or writes.
ALTER TABLE jobs SET (
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_cost_delay = 0
);
