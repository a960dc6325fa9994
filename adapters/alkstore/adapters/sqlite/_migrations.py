"""The SQLite engine's schema versions (ADR 063): each a tuple of statements, applied in order."""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

#: The schema, one entry per version: version ``n`` is ``MIGRATIONS[n - 1]``, applied in one
#: ``BEGIN IMMEDIATE`` transaction with the version row it sets.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE alkstore_counters (
            name TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        )""",
        "INSERT INTO alkstore_counters (name, value) VALUES ('job', 0), ('token', 0), ('line', 0)",
        """CREATE TABLE alkstore_jobs (
            id INTEGER PRIMARY KEY,
            queue TEXT NOT NULL,
            payload BLOB NOT NULL,
            state TEXT NOT NULL,
            priority INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            expires_at INTEGER,
            attempts INTEGER NOT NULL,
            max_attempts INTEGER NOT NULL,
            last_error TEXT,
            schedule TEXT,
            boundary INTEGER,
            enqueued_at INTEGER NOT NULL,
            worker_id TEXT,
            lease_until INTEGER,
            died_at INTEGER,
            fence INTEGER NOT NULL,
            visibility INTEGER,
            task TEXT,
            last_traceback TEXT,
            trace TEXT,
            unique_key TEXT,
            unique_running INTEGER NOT NULL DEFAULT 0,
            ordering_key TEXT,
            waiting INTEGER NOT NULL DEFAULT 0,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            line INTEGER NOT NULL DEFAULT 0,
            attempt_log BLOB
        )""",
        "CREATE INDEX alkstore_jobs_ready ON alkstore_jobs (queue, state, waiting, priority DESC, run_at, id)",
        "CREATE INDEX alkstore_jobs_leases ON alkstore_jobs (queue, state, lease_until)",
        "CREATE INDEX alkstore_jobs_expiry ON alkstore_jobs (queue, expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX alkstore_jobs_dead ON alkstore_jobs (queue, state, died_at)",
        "CREATE UNIQUE INDEX alkstore_jobs_unique ON alkstore_jobs (queue, unique_key) WHERE unique_key IS NOT NULL",
        "CREATE INDEX alkstore_jobs_lines ON alkstore_jobs (queue, ordering_key, line) WHERE ordering_key IS NOT NULL",
        """CREATE TABLE alkstore_results (
            id INTEGER PRIMARY KEY,
            queue TEXT NOT NULL,
            payload BLOB NOT NULL,
            task TEXT,
            attempts INTEGER NOT NULL,
            max_attempts INTEGER NOT NULL,
            enqueued_at INTEGER NOT NULL,
            started_at INTEGER,
            finished_at INTEGER NOT NULL,
            keep_until INTEGER NOT NULL,
            worker_id TEXT,
            result BLOB NOT NULL,
            attempt_log BLOB
        )""",
        "CREATE INDEX alkstore_results_listing ON alkstore_results (queue, finished_at, id)",
        "CREATE INDEX alkstore_results_expiry ON alkstore_results (keep_until, id)",
        """CREATE TABLE alkstore_queues (
            queue TEXT PRIMARY KEY,
            visibility INTEGER,
            max_attempts INTEGER,
            backoff_base INTEGER,
            backoff_cap INTEGER,
            priority INTEGER,
            concurrency INTEGER,
            keep_results INTEGER,
            paused INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE alkstore_locks (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        )""",
        """CREATE TABLE alkstore_schedules (
            name TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            interval_s INTEGER NOT NULL,
            queue TEXT NOT NULL,
            payload BLOB NOT NULL,
            priority INTEGER,
            max_attempts INTEGER,
            expires INTEGER,
            task TEXT,
            anchor INTEGER,
            next_boundary INTEGER NOT NULL,
            last_boundary INTEGER
        )""",
        """CREATE TABLE alkstore_workers (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            queues TEXT NOT NULL,
            concurrency INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            seen_at INTEGER NOT NULL,
            running INTEGER NOT NULL,
            processed INTEGER NOT NULL,
            failed INTEGER NOT NULL
        )""",
        """CREATE TABLE alkstore_throughput (
            minute INTEGER NOT NULL,
            queue TEXT NOT NULL,
            done INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            PRIMARY KEY (minute, queue)
        )""",
    ),
    # Version 2 (ADR 064): a job says when its latest claim was. One nullable column, added in place
    # (SQLite rewrites no row for it), so a file of version 1 migrates in a moment; a dead job keeps the
    # attempt log its row already had room for.
    ("ALTER TABLE alkstore_jobs ADD COLUMN claimed_at INTEGER",),
    # The action log (ADR 068): what operators did through a console, appended and read newest first.
    (
        """CREATE TABLE alkstore_action_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,
            role TEXT NOT NULL,
            address TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            outcome TEXT NOT NULL
        )""",
    ),
    # Version 4: the jobs' state indexes hold only the rows their reads look for (pending jobs, running leases,
    # dead jobs), so an enqueue, a claim and an ack each write fewer index pages. Each read names its state.
    (
        "DROP INDEX alkstore_jobs_ready",
        "CREATE INDEX alkstore_jobs_ready ON alkstore_jobs (queue, waiting, priority DESC, run_at, id)"
        " WHERE state = 'pending'",
        "DROP INDEX alkstore_jobs_leases",
        "CREATE INDEX alkstore_jobs_leases ON alkstore_jobs (queue, lease_until) WHERE state = 'running'",
        "DROP INDEX alkstore_jobs_dead",
        "CREATE INDEX alkstore_jobs_dead ON alkstore_jobs (queue, died_at) WHERE state = 'dead'",
    ),
    # Version 5 (ADR 069): steps, waits and events; three new tables, nothing else changed.
    (
        """CREATE TABLE alkstore_steps (
            job_id INTEGER NOT NULL,
            name TEXT NOT NULL,
            result BLOB NOT NULL,
            at INTEGER NOT NULL,
            PRIMARY KEY (job_id, name)
        )""",
        """CREATE TABLE alkstore_waits (
            job_id INTEGER PRIMARY KEY,
            until INTEGER NOT NULL,
            event TEXT
        )""",
        "CREATE INDEX alkstore_waits_event ON alkstore_waits (event) WHERE event IS NOT NULL",
        """CREATE TABLE alkstore_events (
            name TEXT PRIMARY KEY,
            payload BLOB NOT NULL,
            at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        )""",
        "CREATE INDEX alkstore_events_expiry ON alkstore_events (expires_at)",
    ),
    # Version 6 (ADR 070): rate limits. A queue's limits (a count per a period in microseconds), the key a
    # job's starts count against, and the earliest next start of each limited queue (key '') and key.
    (
        "ALTER TABLE alkstore_queues ADD COLUMN rate_count INTEGER",
        "ALTER TABLE alkstore_queues ADD COLUMN rate_per INTEGER",
        "ALTER TABLE alkstore_queues ADD COLUMN key_rate_count INTEGER",
        "ALTER TABLE alkstore_queues ADD COLUMN key_rate_per INTEGER",
        "ALTER TABLE alkstore_jobs ADD COLUMN rate_key TEXT",
        """CREATE TABLE alkstore_rate_starts (
            queue TEXT NOT NULL,
            key TEXT NOT NULL,
            next_at INTEGER NOT NULL,
            PRIMARY KEY (queue, key)
        )""",
    ),
    # Version 7, dependencies (ADR 073): a parent counts the dependents ever enqueued after it (its end then looks
    # at their rows); a dependent's parents are rows of alkstore_job_dependencies, which go with it when
    # its row is deleted (acked, cancelled, purged dead): a trigger, run only for a job with parents.
    (
        "ALTER TABLE alkstore_jobs ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE alkstore_jobs ADD COLUMN on_parent_failure TEXT",
        """CREATE TABLE alkstore_job_dependencies (
            child INTEGER NOT NULL,
            parent INTEGER NOT NULL,
            position INTEGER NOT NULL,
            state TEXT NOT NULL,
            result BLOB,
            PRIMARY KEY (child, parent)
        ) WITHOUT ROWID""",
        "CREATE INDEX alkstore_job_dependencies_parent ON alkstore_job_dependencies (parent) WHERE state = 'waiting'",
        """CREATE TRIGGER alkstore_jobs_unlink AFTER DELETE ON alkstore_jobs
            WHEN OLD.on_parent_failure IS NOT NULL
            BEGIN DELETE FROM alkstore_job_dependencies WHERE child = OLD.id; END""",
    ),
    # Version 8 (ADR 075): runs, run time and pickup latency per minute, queue and task; a new table.
    (
        """CREATE TABLE alkstore_task_figures (
            minute INTEGER NOT NULL,
            queue TEXT NOT NULL,
            task TEXT NOT NULL,
            done INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            run_ms REAL NOT NULL,
            latency_ms REAL NOT NULL,
            PRIMARY KEY (minute, queue, task)
        ) WITHOUT ROWID""",
    ),
)
