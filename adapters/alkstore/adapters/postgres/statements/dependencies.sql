-- Job dependencies (ADR 073): a dependent's enqueue and the reads of its links. Its promotion and
-- what a parent's death does are the trigger settle_21 (migration 0021), run by the parent's
-- deletion whatever statement deletes it.

-- name: lock_parents
-- The parents of a dependent that are live, each counted one dependent more: the update
-- row-locks them until the enqueue's transaction ends, so an ack of one waits for it and then
-- sees the dependent. The others are read by finished_parents, in a statement (a snapshot) of
-- their own, which sees a parent acked or buried while this one waited.
UPDATE {s}.jobs AS j SET dependents = j.dependents + 1
FROM unnest(%(parents)s::bigint[]) AS p(id)
WHERE {held_ids: %(parents)s} AND j.id = p.id
RETURNING j.id

-- name: finished_parents
-- Of the parents not live: the dead ones ('failed'), those whose outcome is kept ('succeeded',
-- with it); one in neither is no parent the store knows.
SELECT p.id, CASE WHEN d.id IS NOT NULL THEN 'failed' WHEN r.id IS NOT NULL THEN 'succeeded' END, r.result
FROM unnest(%(parents)s::bigint[]) AS p(id)
LEFT JOIN {s}.dead_jobs AS d ON d.id = p.id
LEFT JOIN {s}.results AS r ON r.id = p.id

-- name: enqueue_dependent
-- A job with parents: 'waiting' while any of them is live (parents_left), else as any new job (its
-- rate_key kept, as enqueue_keyed keeps it); in the same statement its rows of job_dependencies, one
-- per parent in the order named, each as the enqueue found it (none when its unique key is held:
-- the holder stands in for it).
WITH new AS (
    INSERT INTO {s}.jobs (queue, payload, state, priority, run_at, expires_at, max_attempts,
                          visibility_us, task, trace, enqueued_at, unique_key, unique_running,
                          parents_left, on_parent_failure, rate_key)
    VALUES (%(queue)s, %(payload)s,
            CASE WHEN %(parents_left)s::integer > 0 THEN 'waiting' ELSE {state_at: %(run_at)s::timestamptz} END,
            %(priority)s, %(run_at)s, %(expires_at)s, %(max_attempts)s, %(visibility_us)s, %(task)s, %(trace)s,
            %(now)s, %(unique_key)s, %(unique_running)s, %(parents_left)s, %(on_parent_failure)s, %(rate_key)s)
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id, state),
linked AS (
    INSERT INTO {s}.job_dependencies (child, parent, position, state, result)
    SELECT new.id, p.parent, p.position, p.state, p.result
    FROM new, unnest(%(parents)s::bigint[], %(states)s::text[], %(results)b::bytea[]) WITH ORDINALITY
      AS p(parent, state, result, position))
SELECT id, pg_notify(%(channel)s, '') FROM new WHERE state = 'pending'
UNION ALL
SELECT id, NULL FROM new WHERE state <> 'pending'

-- name: requeued_links
-- The links of the requeued dependents among the ids (ADR 077), each child's in the order named.
SELECT d.child, d.parent, j.on_parent_failure
FROM {s}.job_dependencies AS d JOIN {s}.jobs AS j ON j.id = d.child
WHERE d.child = ANY(%(ids)s::bigint[]) AND j.on_parent_failure IS NOT NULL
ORDER BY d.child, d.position

-- name: relink_requeued
-- Requeued dependents' links as their parents are now (a result handed over before is kept while the
-- parent counts as succeeded), and each dependent 'waiting' while one of them is live.
WITH l AS (
    SELECT * FROM unnest(%(children)s::bigint[], %(parents)s::bigint[], %(states)s::text[], %(results)b::bytea[])
      AS l(child, parent, state, result)),
relinked AS (
    UPDATE {s}.job_dependencies AS d
       SET state = l.state, result = CASE WHEN l.state = 'succeeded' THEN coalesce(l.result, d.result) END
      FROM l WHERE d.child = l.child AND d.parent = l.parent)
UPDATE {s}.jobs AS j SET parents_left = c.n, state = CASE WHEN c.n > 0 THEN 'waiting' ELSE j.state END
FROM (SELECT child, (count(*) FILTER (WHERE state = 'waiting'))::integer AS n FROM l GROUP BY child) AS c
WHERE j.id = c.child

-- name: follow_parent
-- A dependent enqueued after a parent that is dead already follows its policy at once.
SELECT {s}.follow_parent_19(%(child)s, %(parent)s, %(now)s)

-- name: dependency_links
-- A job's parents as it sees them (in the order named), then the jobs still waiting on it.
(SELECT parent, state, result, NULL::bigint AS child FROM {s}.job_dependencies
  WHERE child = %(id)s ORDER BY position)
UNION ALL
(SELECT NULL, NULL, NULL, d.child FROM {s}.job_dependencies AS d
  WHERE d.parent = %(id)s AND d.state = 'waiting' AND EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.id = d.child)
  ORDER BY d.child)
