-- alkstore schema, version 2: the jobs table drops its CHECK constraints.
--
-- PostgreSQL (measured on 15) re-parses and prepares every CHECK constraint of a table for
-- each INSERT or UPDATE statement, however small the check. The jobs table is written by
-- every enqueue and every claim, and its five checks cost about 15 µs of server CPU per such
-- statement: a tenth of an enqueue's server time, more than the NOTIFY it sends. The
-- invariants they asserted hold by construction of the engine's statements, the table's only
-- writers, and the contract and model tests hold the engine to them through every operation:
--   * state is 'pending' or 'running' (dead jobs live in dead_jobs): only those two literals
--     are ever written;
--   * a job is running exactly when it has a worker and a lease end: the claim sets both,
--     and retry and the lease sweep clear both when they make a job pending;
--   * attempts and lease never go below 0 and max_attempts is at least 1: the counters only
--     grow (requeue_dead resets attempts to 0), and core validates max_attempts before any
--     SQL runs.
-- The schedules table keeps its checks: it is written once per registration or tick, not
-- once per job.

ALTER TABLE jobs
    DROP CONSTRAINT jobs_state_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_max_attempts_check,
    DROP CONSTRAINT jobs_lease_check,
    DROP CONSTRAINT jobs_check;
