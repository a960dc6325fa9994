"""Server CPU and client calls of one claim on PostgreSQL, per kind of claim (ADR 061, amended 2026-12-07).

Run by hand, never from the test suite, on the machine that runs the server (it reads the server
process's ``/proc/<pid>/schedstat``)::

    .venv/bin/python bench/claim_cpu_server.py [--dsn URL] [--claims 300] [--rounds 5] [--against DIR]

Load-independent: the store has one pooled connection, and the CPU time its server process ran
(``schedstat``'s first field) is read before and after each claim, so other work on the machine is
not counted. The subjects, each a claim of up to 4 jobs through the engine's ``claim``:

- ``idle wake``: one job ready (enqueued before, not counted), claimed from the cursor;
- ``busy``: thousands ready, 4 claimed from the cursor;
- ``empty``: none ready, from the cursor (the queue claimed from before);
- ``full, idle wake``: one job ready, every claim in full (``claim_backstop=0``).

Per subject also the Python and C calls the client makes per claim (``sys.setprofile`` events,
the claim's own round trip included), the shared buffers ``EXPLAIN (ANALYZE, BUFFERS)`` reads for
an idle wake, and the generic plan's init plans and nodes of each claim statement.

``--against DIR``: a checkout's ``core`` and ``adapters`` (``git archive <rev> core adapters``) run in
rounds interleaved with this one, each round a fresh process per revision; each figure is the median
over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, backend_pid, load_average, server_cpu_ns

import alkstore
from alkstore import Store
from alkstore.adapters.postgres._cursors import claim_params
from alkstore.engine import ClaimRequest, Held

SUBJECTS = ("idle wake", "busy", "empty", "full, idle wake")
#: A backstop no run reaches: every claim after the first of a queue reads from the cursor.
HOUR = 3600.0
LIMIT = 4
#: Claims run ahead of the counted ones: psycopg prepares a statement at its sixth run, the server plans it
#: generically after five more.
WARM = 15


@contextmanager
def scratch(dsn: str, backstop: float) -> Iterator[Store]:
    schema = f"claimcpu_{uuid.uuid4().hex[:8]}"
    store = alkstore.open(
        dsn, schema=schema, migrate=True, min_size=1, max_size=1, claim_backstop=backstop, clock=alkstore.SystemClock()
    )
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class Counted:
    """Python and C calls, counted while installed as the profile hook."""

    def __init__(self) -> None:
        self.python = self.c = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.python += 1
        elif event == "c_call":
            self.c += 1


def measure(store: Store, queue: str, claims: int, before: Callable[[], object], expect: int) -> dict[str, float]:
    """Per claim of ``queue``: server CPU (ms), Python and C calls; ``before`` runs (uncounted) ahead of each."""
    engine: Any = store.engine
    pid = backend_pid(store)
    clock = alkstore.SystemClock()
    spent, counted = 0, Counted()
    for n in range(WARM + claims):
        if n == WARM:
            spent, counted = 0, Counted()
        before()
        request = ClaimRequest(queue, "bench", clock.now(), timedelta(seconds=300), limit=LIMIT)
        start = server_cpu_ns(pid)
        sys.setprofile(counted)
        held = engine.claim(request)
        sys.setprofile(None)
        spent += server_cpu_ns(pid) - start
        assert len(held) == expect, (queue, len(held))
        if held:
            assert engine.ack([Held(job.id, job.fence) for job in held]) == []
    return {"cpu_ms": spent / claims / 1e6, "python": counted.python / claims, "c": counted.c / claims}


def idle_buffers(store: Store, queue: str) -> int:
    """Shared buffers of an idle wake's claim (one job ready), explained and rolled back."""
    engine: Any = store.engine
    store.queue(queue).enqueue("one")
    now = store.clock.now()
    request = ClaimRequest(queue=queue, worker_id="bench", now=now, lease=timedelta(seconds=300), limit=LIMIT)
    params = {**engine._cursors.params(queue, now), **claim_params(request)}
    text = getattr(engine._sql, "claim_full", engine._sql.claim) if params["full"] else engine._sql.claim
    with engine.pool.connection() as conn, conn.transaction(force_rollback=True):
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text, params).fetchone()
    assert plan is not None
    top = plan[0][0]["Plan"]
    store.queue(queue).claim("bench").ack()  # type: ignore[union-attr]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)[sbt]")


def numbered(text: str) -> tuple[str, int]:
    """``text`` with each ``%(name)s`` a ``$n`` (the same n for the same name), and how many there are."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return "%" if match.group(0) == "%%" else f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    return _PLACEHOLDER.sub(number, text), len(numbers)


def generic_plan_counts(store: Store) -> dict[str, tuple[int, int]]:
    """Per claim statement: the init plans and nodes of its generic plan (every argument NULL)."""
    engine: Any = store.engine
    found = {}
    for name in ("claim", "claim_full", "ack_and_claim", "ack_and_claim_full"):
        text = getattr(engine._sql, name, None)
        if text is None:
            continue
        text, count = numbered(text)
        with engine.pool.connection() as conn, conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE counted AS {text}")
            lines = [row[0] for row in conn.execute(f"EXPLAIN EXECUTE counted({', '.join(['NULL'] * count)})")]
            conn.execute("DEALLOCATE counted")
        found[name] = (sum("InitPlan" in line for line in lines), 1 + sum("->" in line for line in lines))
    return found


def run_once(dsn: str, claims: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with scratch(dsn, HOUR) as store:
        queue = store.queue("wake")
        queue.enqueue("first")
        store.queue("wake").claim("bench").ack()  # type: ignore[union-attr]
        figures["idle wake"] = measure(store, "wake", claims, lambda: queue.enqueue("one"), 1)
        busy = store.queue("busy")
        busy.enqueue_many(range((WARM + claims) * LIMIT + 2000))
        figures["busy"] = measure(store, "busy", claims, lambda: None, LIMIT)
        figures["empty"] = measure(store, "wake", claims, lambda: None, 0)
        figures["buffers, idle wake"] = idle_buffers(store, "wake")
        figures["plans"] = generic_plan_counts(store)
    with scratch(dsn, 0.0) as store:
        queue = store.queue("wake")
        figures["full, idle wake"] = measure(store, "wake", claims, lambda: queue.enqueue("one"), 1)
        figures["buffers, full idle wake"] = idle_buffers(store, "wake")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="a checkout's directory holding core/ and adapters/")
    parser.add_argument("--once", action="store_true", help="one run of this process's code, as JSON")
    args = parser.parse_args()
    if args.once:
        print(json.dumps(run_once(args.dsn, args.claims)))
        return 0
    revisions = {"this": None, **({"against": args.against} if args.against else {})}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in revisions}
    print(f"load before: {load_average()}")
    for _ in range(args.rounds):
        for name, where in revisions.items():
            env = dict(os.environ)
            if where is not None:
                env["PYTHONPATH"] = f"{where}/core{os.pathsep}{where}/adapters"
            command = [sys.executable, __file__, "--once", "--dsn", args.dsn, "--claims", str(args.claims)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(out))
    print(f"load after: {load_average()}")
    print("| subject | revision | server CPU ms/claim (median) | Python calls | C calls |")
    print("| --- | --- | --- | --- | --- |")
    for subject in SUBJECTS:
        for name in revisions:
            cpu = statistics.median(run[subject]["cpu_ms"] for run in runs[name])
            python = statistics.median(run[subject]["python"] for run in runs[name])
            c = statistics.median(run[subject]["c"] for run in runs[name])
            print(f"| {subject} | {name} | {cpu:.3f} | {python:.0f} | {c:.0f} |")
    for name in revisions:
        last = runs[name][-1]
        print(f"{name}: buffers idle wake {last['buffers, idle wake']}, full {last['buffers, full idle wake']}")
        print(f"{name}: generic plans (init plans, nodes) {last['plans']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
