-- A queue's stored configuration (ADR 016): one row of the queues table, its settings upserted
-- whole; whether it is paused (ADR 033) is kept apart, and a row left with neither is removed.

-- fragment: queue_config_columns
visibility_us, max_attempts, backoff_base_us, backoff_cap_us, priority, concurrency, keep_results_us,
rate_count, rate_per_us, key_rate_count, key_rate_per_us

-- name: queue_config
SELECT {queue_config_columns}, paused FROM {s}.queues WHERE name = %(queue)s

-- name: queue_configs
SELECT name, {queue_config_columns}, paused FROM {s}.queues WHERE name = ANY(%(queues)s)

-- name: configure_queue
INSERT INTO {s}.queues (name, {queue_config_columns})
VALUES (%(queue)s, %(visibility_us)s, %(max_attempts)s, %(backoff_base_us)s, %(backoff_cap_us)s,
        %(priority)s, %(concurrency)s, %(keep_results_us)s,
        %(rate_count)s, %(rate_per_us)s, %(key_rate_count)s, %(key_rate_per_us)s)
ON CONFLICT (name) DO UPDATE SET visibility_us = excluded.visibility_us,
    max_attempts = excluded.max_attempts, backoff_base_us = excluded.backoff_base_us,
    backoff_cap_us = excluded.backoff_cap_us, priority = excluded.priority,
    concurrency = excluded.concurrency, keep_results_us = excluded.keep_results_us,
    rate_count = excluded.rate_count, rate_per_us = excluded.rate_per_us,
    key_rate_count = excluded.key_rate_count, key_rate_per_us = excluded.key_rate_per_us
RETURNING name

-- name: set_paused
INSERT INTO {s}.queues (name, paused) VALUES (%(queue)s, %(paused)s)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused
RETURNING name

-- name: unconfigure_queue
-- The row of a queue with no settings left and not paused.
DELETE FROM {s}.queues
WHERE name = %(queue)s AND NOT paused AND visibility_us IS NULL AND max_attempts IS NULL
  AND backoff_base_us IS NULL AND backoff_cap_us IS NULL AND priority IS NULL AND concurrency IS NULL
  AND keep_results_us IS NULL AND rate_count IS NULL AND key_rate_count IS NULL
RETURNING name
