"""What a claim reads while the xmin horizon is pinned: buffers and index entries per statement, by dead rows.

Run by hand, never from the test suite::

    .venv/bin/python bench/pinned_claims.py [--dsn URL] [--levels 0,10000,50000,100000] [--live 64]

These are counts, not times: they do not depend on the machine's load. A store is made by
``alkstore.open(..., migrate=True)`` (the real schema) and the floor's table in a schema of its
own. One connection then runs ``BEGIN; SELECT txid_current()`` and stays idle in its
transaction, so nothing deleted after it began can be vacuumed. Jobs are enqueued, claimed and
acked with the worker's own statements (``claim`` with a limit, from the cursor the engine
keeps from them, ADR 061, and ``ack_many``) until the table
holds each level's number of finished jobs' dead rows; then ``--live`` ready jobs are enqueued
behind them and each statement below runs under ``EXPLAIN (ANALYZE, BUFFERS)`` (five times,
the median reported; the claims are real and committed, as a worker's are, and what they
claimed is acked after each, as a worker would, so no live running job stands in front):

- ``claim``: the worker's claim of 4 read in full (its probe for lapsed leases, expired and
  due-delayed jobs included): the claim before ADR 061, and the one the engine still runs at
  least every ``claim_backstop``; the engine's claim from its cursor (ADR 061), with the bounds
  the builder's claims left it; ``ack_and_claim``: the 4 just claimed acked and 4 more claimed in one statement,
  ``ack_many`` alone, ``soonest_due`` (an idle worker's read) read in full as before ADR 078 and
  from the engine's cursor, and ``lease_probe`` at a time past
  the default lease (300 s), when every finished job's ``running`` entry has lapsed, in full and
  from where a probe a second before looked up to (ADR 061);
- the floor's claim (one row, ``FOR UPDATE SKIP LOCKED``) and its ``DELETE`` by id;
- both claims from a cursor: the same statement with a lower bound on the ready index, ``AND
  priority = p AND (run_at, id) >= (t, i)``, at the key of the finished job ``MARGIN`` (800)
  finished jobs before the ready head (a claim that starts where the worker's last claims were,
  a second behind at 800 jobs/s). A measuring stand-in for the design of
  ``docs/pressure-design.md``, not a claim alkstore makes: one priority only, and no job that
  becomes ready behind the cursor is found.

Per statement: shared buffers hit+read, and per index, the entries its scans read
(``pg_stat_user_indexes.idx_tup_read``: dead entries included) and the heap rows they fetched
(``idx_tup_fetch``: only visible ones). Per level, the tables' ``n_dead_tup`` and the size of
each index. Last, the pin is released and the last level measured again, then both tables are
vacuumed and it is measured once more (``--live`` more ready jobs enqueued before each).
``shared_preload_libraries`` is read: with ``pg_stat_statements`` loaded its per-statement
buffer counts are printed too (the server's configuration is never changed here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average

import alkstore
from alkstore.adapters.postgres import _rows
from alkstore.adapters.postgres._cursors import ClaimCursors, full_params
from alkstore.adapters.postgres._sql import Statements

QUEUE = "pressure"
#: The worker's claim size in the issue's set-up: four threads, each free one claimed.
CLAIM = 4
#: Jobs per statement while the dead rows are being made.
BUILD = 500
PAYLOAD = b"x" * 256
SAMPLES = 5
#: How far behind the ready head a claim's cursor is set: finished jobs (a second of the issue's 800 jobs/s).
MARGIN = 800
#: What a worker at 800 jobs/s claims in 10 s (``WIDE`` and ``LEASE_AHEAD``): the reads that look that far back are
#: measured over the build's last this many claims, not over 10 s of its (faster, load-dependent) pace.
TEN_SECONDS = 8000
#: The claim's ready-index condition, which the cursor variant extends.
READY = "AND state = 'pending' AND run_at <= %(now)s"
#: The lower bound a claim from a cursor adds (one priority: the stand-in for a bound per priority).
FROM_CURSOR = " AND priority = %(cursor_priority)s AND (run_at, id) >= (%(cursor_at)s, %(cursor_id)s)"


def claim_params(worker: str, limit: int, now: datetime) -> dict[str, Any]:
    """The parameters the engine binds to its full claim (``_engine_async.ack_and_claim``; ADR 061: the one it
    runs at least every ``claim_backstop``, from the left end of the ready index, with a full lease probe)."""
    return {
        **full_params(),
        "probe": True,
        "queue": QUEUE,
        "worker": worker,
        "now": now,
        "lease_us": 300_000_000,
        "limit": limit,
        "limited": False,
        "lease_expired_error": b"lease expired",
        "job_expired_error": b"job expired",
    }


class Subject:
    """One table measured: how to make a finished job, and its statements under EXPLAIN."""

    name: str
    schema: str
    table: str

    def finish(self, count: int) -> None:
        raise NotImplementedError

    def enqueue(self, count: int) -> None:
        raise NotImplementedError

    def statements(self) -> list[tuple[str, Callable[[psycopg.Connection[Any]], tuple[str, dict[str, Any]]]]]:
        raise NotImplementedError

    conn: psycopg.Connection[Any]

    def settle(self) -> None:
        """Finish what the measured statements claimed (worker ``w``), so no live running job lingers."""
        raise NotImplementedError

    def report_statistics(self) -> None:
        """Have the connection that claims and deletes report its counts now (it does so only when idle)."""
        self.conn.execute("SELECT pg_stat_force_next_flush()")
        self.conn.execute("SELECT 1")
        time.sleep(0.2)


class Store(Subject):
    name = "alkstore"

    def __init__(self, dsn: str, schema: str) -> None:
        self.schema = schema
        self.table = "jobs"
        self.store = alkstore.open(dsn, schema=schema, migrate=True, min_size=1, max_size=2)
        self.queue = self.store.queue(QUEUE)
        self.sql = Statements.for_schema(schema)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("SET TIME ZONE 'UTC'")
        self.held: list[tuple[int, int]] = []
        #: The cursor the engine keeps from its claims; no full claim comes due while this runs.
        self.cursors = ClaimCursors(backstop=24 * 3600)
        #: The claim order's key (priority, run_at, id) of the last jobs the build claimed, oldest first.
        self.finished_keys: list[tuple[int, datetime, int]] = []
        #: The instant of each of the build's last TEN_SECONDS claimed jobs' claims, oldest first.
        self.claimed_at: deque[datetime] = deque(maxlen=TEN_SECONDS)
        assert self.sql.claim_full.count(READY) == 1
        self.claim_from_cursor = self.sql.claim_full.replace(READY, READY + FROM_CURSOR)

    def enqueue(self, count: int) -> None:
        for start in range(0, count, 1000):
            self.queue.enqueue_many([PAYLOAD] * min(1000, count - start))

    def _claim(self, limit: int) -> list[tuple[int, int]]:
        # The engine's claim, in full or from the cursor it keeps from these very claims (ADR 061).
        now = datetime.now(UTC)
        params = {**claim_params("builder", limit, now), **self.cursors.params(QUEUE, now)}
        with self.conn.cursor(binary=True, row_factory=_rows.JOB_OR_SWEPT) as cur:
            claim = self.sql.claim_full if params["full"] else self.sql.claim
            records = [row for row in cur.execute(claim, params).fetchall() if row is not None]
        self.cursors.claimed(QUEUE, now, params, records)
        keys = sorted((-job.priority, job.run_at, job.id) for job in records)
        self.finished_keys = (self.finished_keys + [(-p, t, i) for p, t, i in keys])[-TEN_SECONDS:]
        self.claimed_at.extend([now] * len(records))
        return [(job.id, job.fence) for job in records]

    def _ack(self, held: list[tuple[int, int]]) -> None:
        self.conn.execute(self.sql.ack_many, {"ids": [h[0] for h in held], "fences": [h[1] for h in held]})

    def finish(self, count: int) -> None:
        self.enqueue(count)
        while held := self._claim(BUILD):
            self._ack(held)

    def statements(self) -> list[tuple[str, Callable[[psycopg.Connection[Any]], tuple[str, dict[str, Any]]]]]:
        def claim(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            return self.sql.claim_full, claim_params("w", CLAIM, datetime.now(UTC))

        def ack_and_claim(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            held = self._claim(CLAIM)
            params = claim_params("w", CLAIM, datetime.now(UTC))
            params.update({"ids": [h[0] for h in held], "fences": [h[1] for h in held]})
            return self.sql.ack_and_claim_full, params

        def ack_many(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            held = self._claim(CLAIM)
            return self.sql.ack_many, {"ids": [h[0] for h in held], "fences": [h[1] for h in held]}

        def soonest_due(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            # As before ADR 078: a cursor that never claimed reads the queue in full (both left ends).
            return self.sql.soonest_due, ClaimCursors(backstop=1).idle_params([QUEUE])

        def idle_params() -> dict[str, Any]:
            # The engine's parameters, its band read from where a wide claim reads at 800 jobs/s (WIDE, 10 s, of
            # claims back: TEN_SECONDS finished jobs), not from 10 s of the build's load-dependent pace.
            params = self.cursors.idle_params([QUEUE])
            if len(self.finished_keys) == TEN_SECONDS:
                priority, at, job = self.finished_keys[0]
                for n, (hi, lo) in enumerate(zip(params["band_his"], params["band_los"], strict=True)):
                    if hi == lo == priority:
                        params["band_ats"][n], params["band_ids"][n] = at, job
            return params

        def engine_soonest_due(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            return self.sql.soonest_due, idle_params()

        def lapsed_soonest_due(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            # The same once the pin is older than the leases (300 s): its window of LEASE_AHEAD then holds the leases
            # of 10 s of claims, at 800 jobs/s the build's last TEN_SECONDS (their leases end 300 s after).
            params = idle_params()
            if self.claimed_at:
                lease = timedelta(seconds=300)
                params.update(probed_afters=[self.claimed_at[0] + lease], leases_to=[self.claimed_at[-1] + lease])
            return self.sql.soonest_due, params

        def lapsed_probe(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            params = {"queue": QUEUE, "now": datetime.now(UTC) + timedelta(seconds=301)}
            return self.sql.lease_probe, {**params, "probed_after": full_params()["probed_after"]}

        def lapsed_probe_from_last(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            now = datetime.now(UTC) + timedelta(seconds=301)
            return self.sql.lease_probe, {"queue": QUEUE, "now": now, "probed_after": now - timedelta(seconds=1)}

        def engine_claim(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            now = datetime.now(UTC)
            params = {**claim_params("w", CLAIM, now), **self.cursors.params(QUEUE, now)}
            return self.sql.claim_full if params["full"] else self.sql.claim, params

        cursor = self.finished_keys[-MARGIN] if len(self.finished_keys) >= MARGIN else None
        wide = self.finished_keys[0] if len(self.finished_keys) == TEN_SECONDS else None

        def claim_from_cursor(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            params = claim_params("w", CLAIM, datetime.now(UTC))
            priority, at, job = cursor or (0, datetime(2000, 1, 1, tzinfo=UTC), 0)
            params.update({"cursor_priority": priority, "cursor_at": at, "cursor_id": job})
            return self.claim_from_cursor, params

        def wide_claim(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            # The backstop's wide tier (ADR 067) at 800 jobs/s: from WIDE (10 s) of claims back, TEN_SECONDS jobs.
            params = claim_params("w", CLAIM, datetime.now(UTC))
            priority, at, job = wide or (0, datetime(2000, 1, 1, tzinfo=UTC), 0)
            params.update({"cursor_priority": priority, "cursor_at": at, "cursor_id": job})
            return self.claim_from_cursor, params

        return [
            ("claim (4) read in full (the backstop's full tier)", claim),
            ("ack_and_claim (4+4)", ack_and_claim),
            ("ack_many (4)", ack_many),
            ("soonest_due, read in full (before ADR 078)", soonest_due),
            ("soonest_due, the engine's, from its wide bound (ADR 078)", engine_soonest_due),
            (f"soonest_due, the engine's, leases lapsed (its window on {TEN_SECONDS} leases)", lapsed_soonest_due),
            ("lease_probe, leases lapsed (full)", lapsed_probe),
            ("lease_probe, leases lapsed, from the last probe 1 s before", lapsed_probe_from_last),
            (f"claim (4) from a cursor {MARGIN} finished jobs back", claim_from_cursor),
            ("claim (4), the engine's, from its cursor (ADR 061)", engine_claim),
            (f"claim (4) from a cursor {TEN_SECONDS} finished jobs back (the wide tier at 800 jobs/s)", wide_claim),
        ]

    def settle(self) -> None:
        held = self.conn.execute(
            sql.SQL("SELECT id, lease FROM {}.jobs WHERE state = 'running' AND worker_id = 'w'").format(
                sql.Identifier(self.schema)
            )
        ).fetchall()
        if held:
            self._ack([(row[0], row[1]) for row in held])

    def close(self) -> None:
        self.conn.close()
        self.store.close()


class Floor(Subject):
    """The floor's table and statements (as ``bench/queue_throughput.py``'s ``Floor``)."""

    name = "floor"

    def __init__(self, dsn: str, schema: str) -> None:
        self.schema = schema
        self.table = "jobs"
        self.conn = psycopg.connect(dsn, autocommit=True)
        t = sql.SQL("{}.jobs").format(sql.Identifier(schema))
        self.conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self.conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,"
                " payload bytea NOT NULL, state text NOT NULL DEFAULT 'pending', priority integer NOT NULL DEFAULT 0,"
                " run_at timestamptz NOT NULL DEFAULT now(), attempts integer NOT NULL DEFAULT 0, worker_id text,"
                " lease_until timestamptz)"
            ).format(t)
        )
        self.conn.execute(
            sql.SQL("CREATE INDEX jobs_ready ON {} (queue, priority DESC, run_at, id) WHERE state = 'pending'").format(
                t
            )
        )
        self.insert = sql.SQL("INSERT INTO {} (queue, payload) SELECT %s, p FROM unnest(%s::bytea[]) AS p").format(t)
        self.claim = (
            sql.SQL(
                "UPDATE {t} SET state = 'running', attempts = attempts + 1, worker_id = %(worker)s,"
                " lease_until = now() + interval '300 seconds'"
                " WHERE id = (SELECT id FROM {t} WHERE queue = %(queue)s AND state = 'pending' AND run_at <= now()"
                " ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING id, payload, attempts"
            )
            .format(t=t)
            .as_string(self.conn)
        )
        self.claim_many = (
            self.claim.replace("WHERE id = (", "WHERE id = ANY(ARRAY(")
            .replace("LIMIT 1 FOR UPDATE SKIP LOCKED)", "LIMIT %(limit)s FOR UPDATE SKIP LOCKED))")
            .replace("RETURNING id, payload, attempts", "RETURNING id, run_at")
        )
        self.claim_from_cursor = self.claim.replace(
            "AND state = 'pending' AND run_at <= now()", "AND state = 'pending' AND run_at <= now()" + FROM_CURSOR
        )
        self.finished_keys: list[tuple[int, datetime, int]] = []
        self.delete = sql.SQL("DELETE FROM {} WHERE id = %(id)s").format(t).as_string(self.conn)
        self.delete_many = sql.SQL("DELETE FROM {} WHERE id = ANY(%(ids)s)").format(t).as_string(self.conn)

    def enqueue(self, count: int) -> None:
        for start in range(0, count, 1000):
            self.conn.execute(self.insert, (QUEUE, [PAYLOAD] * min(1000, count - start)))

    def finish(self, count: int) -> None:
        self.enqueue(count)
        while rows := self.conn.execute(self.claim_many, {"worker": "b", "queue": QUEUE, "limit": BUILD}).fetchall():
            self.conn.execute(self.delete_many, {"ids": [row[0] for row in rows]})
            keys = sorted((0, row[1], row[0]) for row in rows)
            self.finished_keys = (self.finished_keys + keys)[-MARGIN:]

    def statements(self) -> list[tuple[str, Callable[[psycopg.Connection[Any]], tuple[str, dict[str, Any]]]]]:
        def claim(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            return self.claim, {"worker": "w", "queue": QUEUE}

        def delete(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            row = self.conn.execute(self.claim, {"worker": "w", "queue": QUEUE}).fetchone()
            return self.delete, {"id": row[0] if row else 0}

        cursor = self.finished_keys[0] if len(self.finished_keys) == MARGIN else None

        def claim_from_cursor(_: psycopg.Connection[Any]) -> tuple[str, dict[str, Any]]:
            priority, at, job = cursor or (0, datetime(2000, 1, 1, tzinfo=UTC), 0)
            return self.claim_from_cursor, {
                "worker": "w", "queue": QUEUE, "cursor_priority": priority, "cursor_at": at, "cursor_id": job,
            }  # fmt: skip

        return [
            ("floor claim (1)", claim),
            ("floor delete (1)", delete),
            (f"floor claim (1) from a cursor {MARGIN} finished jobs back", claim_from_cursor),
        ]

    def settle(self) -> None:
        self.conn.execute(
            sql.SQL("DELETE FROM {}.jobs WHERE state = 'running' AND worker_id = 'w'").format(
                sql.Identifier(self.schema)
            )
        )

    def close(self) -> None:
        self.conn.close()


def index_counters(conn: psycopg.Connection[Any], schema: str) -> dict[str, tuple[int, int]]:
    """Per index of ``schema``: entries read and heap rows fetched by this backend's scans not yet reported.

    Read inside the measured statement's transaction, before and after it: the backend reports
    its counts only when idle, so the difference is the statement's own, whatever else runs.
    """
    rows = conn.execute(
        "SELECT c.relname, pg_stat_get_xact_tuples_returned(c.oid), pg_stat_get_xact_tuples_fetched(c.oid)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'i'",
        (schema,),
    ).fetchall()
    return {name: (read, fetched) for name, read, fetched in rows}


def buffers(plan: dict[str, Any]) -> int:
    """Shared buffers hit and read by the whole statement (the top node's counts include its children's)."""
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def measure(
    subject: Subject, explain: psycopg.Connection[Any]
) -> list[tuple[str, float, float, dict[str, tuple[float, float]]]]:
    """Each statement of ``subject`` run ``SAMPLES`` times under EXPLAIN: medians of buffers, time, index reads."""
    results = []
    for label, make in subject.statements():
        samples: list[tuple[int, float, dict[str, tuple[int, int]]]] = []
        for _ in range(SAMPLES):
            text, params = make(explain)
            with explain.transaction():
                before = index_counters(explain, subject.schema)
                row = explain.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text, params).fetchone()
                assert row is not None
                plan_json = row[0]
                after = index_counters(explain, subject.schema)
            top = (plan_json if isinstance(plan_json, list) else json.loads(plan_json))[0]
            deltas = {
                name: (after[name][0] - before.get(name, (0, 0))[0], after[name][1] - before.get(name, (0, 0))[1])
                for name in after
                if after[name] != before.get(name, (0, 0))
            }
            samples.append((buffers(top["Plan"]), float(top["Execution Time"]), deltas))
            subject.settle()
        names = sorted({name for _, _, d in samples for name in d})
        per_index = {
            name: (
                statistics.median(d.get(name, (0, 0))[0] for _, _, d in samples),
                statistics.median(d.get(name, (0, 0))[1] for _, _, d in samples),
            )
            for name in names
        }
        results.append(
            (
                label,
                statistics.median(b for b, _, _ in samples),
                statistics.median(t for _, t, _ in samples),
                per_index,
            )
        )
    return results


def table_state(watch: psycopg.Connection[Any], subject: Subject) -> str:
    """The table's live and dead rows (statistics), heap and index sizes (pages)."""
    subject.report_statistics()
    watch.execute("SELECT pg_stat_clear_snapshot()")
    row = watch.execute(
        "SELECT n_live_tup, n_dead_tup, pg_relation_size(relid) / 8192 FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = %s",
        (subject.schema, subject.table),
    ).fetchone()
    indexes = watch.execute(
        "SELECT indexrelname, pg_relation_size(indexrelid) / 8192 FROM pg_stat_user_indexes"
        " WHERE schemaname = %s AND relname = %s ORDER BY indexrelname",
        (subject.schema, subject.table),
    ).fetchall()
    assert row is not None
    sizes = ", ".join(f"{name} {pages}" for name, pages in indexes)
    return f"n_live_tup {row[0]}, n_dead_tup {row[1]}, heap {row[2]} pages; index pages: {sizes}"


def report(level: str, subject: Subject, rows: list[tuple[str, float, float, dict[str, tuple[float, float]]]]) -> None:
    for label, bufs, ms, per_index in rows:
        reads = "  ".join(f"{name} {read:,.0f}/{fetched:,.0f}" for name, (read, fetched) in per_index.items())
        print(f"| {level} | {label} | {bufs:,.0f} | {ms:.2f} | {reads} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--levels", default="0,10000,50000,100000", help="dead rows (finished jobs) to measure at")
    parser.add_argument("--live", type=int, default=128, help="ready jobs behind the dead ones at each level")
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    admin = psycopg.connect(args.dsn, autocommit=True)
    preload = admin.execute("SHOW shared_preload_libraries").fetchone()
    statements_loaded = bool(preload and "pg_stat_statements" in str(preload[0]))
    print(f"server: {admin.info.server_version}; shared_preload_libraries: {preload[0] if preload else ''!r}")
    print(f"load before: {load_average()}")
    tag = f"{int(time.time()) % 100000}"
    store = Store(args.dsn, f"pressure_store_{tag}")
    floor = Floor(args.dsn, f"pressure_floor_{tag}")
    explain = psycopg.connect(args.dsn, autocommit=True)
    explain.execute("SET TIME ZONE 'UTC'")
    watch = psycopg.connect(args.dsn, autocommit=True)
    pin = psycopg.connect(args.dsn)
    subjects: list[Subject] = [store, floor]
    try:
        for subject in subjects:
            admin.execute(sql.SQL("VACUUM ANALYZE {}.jobs").format(sql.Identifier(subject.schema)))
        pin.execute("SELECT txid_current()")  # pinned: idle in transaction from here on
        print("| dead rows | statement | buffers | ms | index: entries read / heap rows fetched |")
        print("| --- | --- | --- | --- | --- |")
        made = 0
        states: list[str] = []
        for level in levels:
            for subject in subjects:
                subject.finish(level - made)
            made = level
            for subject in subjects:
                subject.enqueue(args.live)
                states.append(f"{level:,} dead, {subject.name}: {table_state(watch, subject)}")
                report(f"{level:,}", subject, measure(subject, explain))
        pin.rollback()
        for subject in subjects:
            # What the scans do alone once the horizon moves on: each may mark the entries it
            # passes dead (LP_DEAD) now that their tuples are dead to everyone.
            subject.enqueue(args.live)
            states.append(f"unpinned, {subject.name}: {table_state(watch, subject)}")
            report(f"{made:,}, unpinned, before a vacuum", subject, measure(subject, explain))
        for subject in subjects:
            admin.execute(sql.SQL("VACUUM {}.jobs").format(sql.Identifier(subject.schema)))
            subject.enqueue(args.live)
            states.append(f"vacuumed, {subject.name}: {table_state(watch, subject)}")
            report(f"{made:,}, unpinned + VACUUM", subject, measure(subject, explain))
        print()
        for state in states:
            print(state)
        if statements_loaded:
            rows = admin.execute(
                "SELECT calls, shared_blks_hit + shared_blks_read, left(query, 60) FROM pg_stat_statements"
                " WHERE query LIKE %s ORDER BY 2 DESC LIMIT 10",
                (f"%{store.schema}%",),
            ).fetchall()
            for calls, blocks, query in rows:
                print(f"pg_stat_statements: {calls} calls, {blocks / max(calls, 1):,.0f} buffers/call: {query}")
        print(f"load after: {load_average()}")
    finally:
        pin.close()
        store.close()
        floor.close()
        explain.close()
        watch.close()
        for subject in subjects:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(subject.schema)))
        admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
