-- A queue's stored configuration (ADR 016): one row of the queues table, upserted whole.

-- fragment: queue_config_columns
visibility_us, max_attempts, backoff_base_us, backoff_cap_us, priority

-- name: queue_config
SELECT {queue_config_columns} FROM {s}.queues WHERE name = %(queue)s

-- name: queue_configs
SELECT name, {queue_config_columns} FROM {s}.queues WHERE name = ANY(%(queues)s)

-- name: configure_queue
INSERT INTO {s}.queues (name, {queue_config_columns})
VALUES (%(queue)s, %(visibility_us)s, %(max_attempts)s, %(backoff_base_us)s, %(backoff_cap_us)s,
        %(priority)s)
ON CONFLICT (name) DO UPDATE SET visibility_us = excluded.visibility_us,
    max_attempts = excluded.max_attempts, backoff_base_us = excluded.backoff_base_us,
    backoff_cap_us = excluded.backoff_cap_us, priority = excluded.priority
RETURNING name

-- name: unconfigure_queue
DELETE FROM {s}.queues WHERE name = %(queue)s RETURNING name
