-- Recurring schedules and the scheduler's tick (ADR 003, ADR 017): registration, the due
-- schedules in the planner's order, their fires and their next boundaries.

-- name: lock_schedules
SELECT name, interval_s, next_boundary, anchor FROM {s}.schedules WHERE name = ANY(%(names)s) ORDER BY name FOR UPDATE

-- name: insert_schedules
INSERT INTO {s}.schedules ({schedule_columns})
SELECT name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary,
       NULL, anchor
FROM unnest(%(names)s::text[], %(specs)s::text[], %(intervals)s::integer[], %(queues)s::text[],
            %(payloads)b::bytea[], %(priorities)s::integer[], %(max_attempts)s::integer[],
            %(expires_us)s::bigint[], %(tasks)s::text[], %(boundaries)s::timestamptz[], %(anchors)s::timestamptz[])
  AS new(name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary, anchor)
ON CONFLICT (name) DO NOTHING
RETURNING {schedule_columns}

-- name: update_schedules
UPDATE {s}.schedules AS s SET spec = u.spec, interval_s = u.interval_s, queue = u.queue,
    payload = u.payload, priority = u.priority, max_attempts = u.max_attempts, expires_us = u.expires_us,
    task = u.task, next_boundary = u.next_boundary, anchor = u.anchor
FROM unnest(%(names)s::text[], %(specs)s::text[], %(intervals)s::integer[], %(queues)s::text[],
            %(payloads)b::bytea[], %(priorities)s::integer[], %(max_attempts)s::integer[],
            %(expires_us)s::bigint[], %(tasks)s::text[], %(boundaries)s::timestamptz[], %(anchors)s::timestamptz[])
  AS u(name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, task, next_boundary, anchor)
WHERE s.name = u.name
RETURNING {schedule_columns_of_s}

-- name: unschedule
DELETE FROM {s}.schedules WHERE name = %(name)s RETURNING name

-- name: schedules
SELECT {schedule_columns} FROM {s}.schedules ORDER BY name

-- name: due_schedules
-- The tick's due schedules, in the planner's order (alkstore._tick.plan_key), locked; the
-- payload stays in the database: only its size is read.
SELECT name, interval_s, queue, priority, max_attempts, expires_us, next_boundary,
       octet_length(payload) AS payload_size
FROM {s}.schedules WHERE next_boundary <= %(now)s
ORDER BY octet_length(payload), next_boundary, name
LIMIT %(limit)s
FOR UPDATE

-- name: next_job_ids
SELECT id FROM {s}.next_job_ids(%(count)s) AS id

-- name: insert_fires
-- Fires copy their schedule's payload and task inside the database.
INSERT INTO {s}.jobs (id, queue, payload, state, priority, run_at, expires_at, max_attempts,
                      schedule, boundary, enqueued_at, task)
SELECT f.id, f.queue, s.payload, 'pending', f.priority, f.run_at, f.expires_at, f.max_attempts,
       f.schedule, f.boundary, %(now)s, s.task
FROM unnest(%(ids)s::bigint[], %(schedules)s::text[], %(boundaries)s::timestamptz[], %(queues)s::text[],
            %(priorities)s::integer[], %(run_ats)s::timestamptz[], %(expires_ats)s::timestamptz[],
            %(max_attempts)s::integer[])
  AS f(id, schedule, boundary, queue, priority, run_at, expires_at, max_attempts)
JOIN {s}.schedules AS s ON s.name = f.schedule

-- name: advance_schedules
UPDATE {s}.schedules AS s SET next_boundary = a.next_boundary,
       last_boundary = coalesce(a.last_boundary, s.last_boundary)
FROM unnest(%(names)s::text[], %(boundaries)s::timestamptz[], %(lasts)s::timestamptz[])
  AS a(name, next_boundary, last_boundary)
WHERE s.name = a.name

-- name: notify_queues
SELECT pg_notify({s}.channel(%(schema)s, queue), '') FROM unnest(%(queues)s::text[]) AS queue

-- name: soonest_boundary
SELECT min(next_boundary) AS soonest FROM {s}.schedules
