-- Named locks (leases on a name, fenced by a token): the scheduler's leadership among them.

-- fragment: lock_columns
name, owner, token, expires_at

-- name: try_lock
SELECT {lock_columns} FROM {s}.try_lock(%(name)s, %(owner)s, %(now)s, %(expires_at)s)

-- name: renew_lock
UPDATE {s}.locks SET expires_at = %(expires_at)s
WHERE name = %(name)s AND token = %(token)s AND expires_at > %(now)s
RETURNING {lock_columns}

-- name: release_lock
DELETE FROM {s}.locks WHERE name = %(name)s AND token = %(token)s RETURNING name

-- name: read_lock
SELECT {lock_columns} FROM {s}.locks WHERE name = %(name)s

-- name: list_locks
-- The locks held at now, by name: the column is COLLATE "C", so code point order, the primary key's.
SELECT {lock_columns} FROM {s}.locks
WHERE expires_at > %(now)s AND (%(after)s::text IS NULL OR name > %(after)s::text)
ORDER BY name LIMIT %(limit)s

-- name: renew_lock_peek
-- renew_lock and soonest_boundary in one statement: the leader's renewal across its sleep,
-- which also reads whether a sooner boundary was registered meanwhile (ADR 044).
WITH renewed AS ({renew_lock})
SELECT {lock_columns}, (SELECT min(next_boundary) FROM {s}.schedules) AS soonest FROM renewed
