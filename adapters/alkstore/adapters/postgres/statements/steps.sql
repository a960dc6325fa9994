-- Steps, durable sleep and events (ADR 069): checkpoints fenced by the job's lease, a sleep as the
-- job pending at its due time with its wait stored, and events serialized per name with their
-- waits under an advisory lock taken in a statement of its own (so the statement after it reads
-- what a racing emit or wait committed).

-- fragment: held_job
-- The CTE "held": the job, if it is running under the fence, key-share locked to the end of the
-- transaction (a sweep's FOR UPDATE SKIP LOCKED passes it by; a heartbeat does not wait for it).
held AS (
    SELECT id, queue FROM {s}.jobs WHERE id = %(id)s AND state = {running} AND lease = %(fence)s
    FOR KEY SHARE)

-- name: step_resume
-- The held job's steps, oldest first (a held job without any: one row of NULLs; a stale pair: no
-- row), and its wait cleared: it runs again.
WITH {held_job},
unwaited AS (DELETE FROM {s}.waits AS w USING held WHERE w.job_id = held.id)
SELECT s.name, s.result, s.at FROM held LEFT JOIN {s}.steps AS s ON s.job_id = held.id
ORDER BY s.at, s.name

-- name: step_save
WITH {held_job}
INSERT INTO {s}.steps (job_id, name, result, at)
SELECT id, %(name)s, %(result)b, %(at)s FROM held
ON CONFLICT (job_id, name) DO UPDATE SET result = EXCLUDED.result, at = EXCLUDED.at
RETURNING job_id

-- name: step_skip
-- An operator's skipped step (ADR 077): the job's state ('running', 'dead' or 'pending' for any other
-- live one: no row when it is stored in neither table), its step saved unless it runs, and its
-- fence grown by one (so its next claim reads its steps). The update row-locks the job: a claim
-- racing it either waits for its commit (and its run reads the step) or commits first (the job is
-- then read running, and nothing is written). A running job's row is updated with its lease as it
-- was, for the lock alone.
WITH live AS (
    UPDATE {s}.jobs SET lease = lease + CASE WHEN state = {running} THEN 0 ELSE 1 END
    WHERE id = %(id)s
    RETURNING id, CASE WHEN state = {running} THEN 'running' ELSE 'pending' END AS state),
buried AS (
    UPDATE {s}.dead_jobs SET lease = lease + 1 WHERE id = %(id)s RETURNING id, 'dead' AS state),
found AS (SELECT id, state FROM live UNION ALL SELECT id, state FROM buried),
stepped AS (
    INSERT INTO {s}.steps (job_id, name, result, at)
    SELECT id, %(name)s, %(result)b, %(at)s FROM found WHERE state <> 'running'
    ON CONFLICT (job_id, name) DO UPDATE SET result = EXCLUDED.result, at = EXCLUDED.at)
SELECT state FROM found

-- name: event_lock
-- Serializes the emits and the waits of one event name, to the end of the transaction.
SELECT pg_advisory_xact_lock(hashtext('alkstore events'), hashtext(%(schema)s || ':' || %(event)s))

-- name: step_suspend
-- The held job pending at its due time (now, when its event is stored already), one attempt given
-- back, its wait stored and its step (if any) saved; a job whose cancel was requested is deleted.
WITH {cancelled_instead},
emitted AS (
    SELECT 1 FROM {s}.events WHERE name = %(event)s AND expires_at > %(now)s),
due AS (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM emitted) THEN %(now)s::timestamptz ELSE %(until)s::timestamptz END
      AS run_at),
job AS (
    UPDATE {s}.jobs AS j SET state = {state_at: due.run_at}, run_at = due.run_at,
           attempts = greatest(j.attempts - 1, 0), worker_id = NULL, lease_until = NULL
    FROM due
    WHERE j.id = %(id)s AND j.state = {running} AND j.lease = %(fence)s AND NOT j.cancel_requested
    RETURNING j.id, j.queue),
waited AS (
    INSERT INTO {s}.waits (job_id, until, event) SELECT id, %(until)s, %(event)s FROM job
    ON CONFLICT (job_id) DO UPDATE SET until = EXCLUDED.until, event = EXCLUDED.event),
stepped AS (
    INSERT INTO {s}.steps (job_id, name, result, at)
    SELECT id, %(name)s, %(result)b, %(now)s FROM job WHERE %(name)s::text IS NOT NULL
    ON CONFLICT (job_id, name) DO UPDATE SET result = EXCLUDED.result, at = EXCLUDED.at)
SELECT id FROM cancelled
UNION ALL
{ids_and_notices: job}

-- name: emit
-- The event stored unless an unexpired one of its name is (the first emit wins: true when this one
-- was stored), every job waiting on it due at the emit, its wait cleared and its queue notified,
-- and a few expired events of other names purged; then the queues woken. The purge passes by an
-- expired event another transaction holds (an emit of its name replacing it): it neither waits
-- for that transaction nor, once it commits, deletes the event it stored; a locked row is read
-- anew, so one replaced meanwhile is no longer expired and is left.
WITH kept AS (
    INSERT INTO {s}.events (name, payload, at, expires_at)
    VALUES (%(event)s, %(payload)b, %(now)s, %(expires_at)s)
    ON CONFLICT (name) DO UPDATE SET payload = EXCLUDED.payload, at = EXCLUDED.at, expires_at = EXCLUDED.expires_at
      WHERE {s}.events.expires_at <= EXCLUDED.at
    RETURNING name),
purged AS (
    DELETE FROM {s}.events WHERE name IN (
        SELECT name FROM {s}.events WHERE expires_at <= %(now)s AND name <> %(event)s
        LIMIT 100 FOR UPDATE SKIP LOCKED)),
woken AS (
    DELETE FROM {s}.waits WHERE event = %(event)s RETURNING job_id),
job AS (
    UPDATE {s}.jobs AS j SET run_at = least(j.run_at, %(now)s::timestamptz),
           state = {state_at: least(j.run_at, %(now)s::timestamptz)}
    FROM woken
    WHERE j.id = woken.job_id AND j.state IN ('pending', 'delayed')
    RETURNING j.id, j.queue)
SELECT EXISTS (SELECT 1 FROM kept), ARRAY(SELECT DISTINCT queue FROM job),
       (SELECT count(*) FROM (SELECT pg_notify({s}.channel(%(schema)s, queue), '')
                              FROM (SELECT DISTINCT queue FROM job) AS queues) AS notified)

-- name: read_event
SELECT name, payload, at, expires_at FROM {s}.events WHERE name = %(event)s AND expires_at > %(now)s

-- name: job_steps
-- A job's steps, oldest first, then its wait (name: the event; at: its due time), for get_job.
SELECT * FROM (SELECT false AS wait, name, result, at FROM {s}.steps WHERE job_id = %(id)s ORDER BY at, name) AS done
UNION ALL
SELECT true, event, NULL, until FROM {s}.waits WHERE job_id = %(id)s

-- name: purge_steps
-- The steps and waits of at most %(limit)s jobs stored neither live nor dead (acked, cancelled,
-- purged): an upkeep pass, so that no ack pays for it.
WITH gone AS (
    SELECT job_id FROM (SELECT job_id FROM {s}.steps UNION SELECT job_id FROM {s}.waits) AS kept
    WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.id = kept.job_id)
      AND NOT EXISTS (SELECT 1 FROM {s}.dead_jobs AS d WHERE d.id = kept.job_id)
    LIMIT %(limit)s),
purged AS (DELETE FROM {s}.steps AS s USING gone WHERE s.job_id = gone.job_id),
unwaited AS (DELETE FROM {s}.waits AS w USING gone WHERE w.job_id = gone.job_id)
SELECT count(*) FROM gone
