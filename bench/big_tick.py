"""A tick too big for one transaction, the case of issue 9: twenty ``@every 1s`` schedules with 1 MB
payloads, 70 s behind, and a small schedule beside them in the same schema (ADR 017).

One run: a fresh schema; the schedules registered as if 70 s ago (their next boundary is then
69 s in the past) and the small one now; then a child process leads the scheduler with the
database's clock, as ``alkstore run-schedules`` does, until every big schedule has caught up and
fired live for a few seconds. Meanwhile this process watches the scheduler lease from its own
connection. Reported, as JSON:

- ``peak_rss_mb``: the leading process's peak resident memory (``getrusage``), which the
  payloads would dominate if they passed through it (they are copied inside the database),
  and ``rss_at_open_mb``, the same once the store was open, before leading;
- ``catch_up_s``: how long the big schedules' catch-up took (fires are reported after each of
  the tick's transactions), and ``catch_up_fires``, how many of their backlog it fired;
- ``small_late_s``: how late each fire of the small schedule was (fired minus boundary), the
  largest and the median, and whether it missed a boundary;
- ``lease``: how often the watcher saw the lease renewed, whether it ever saw it lapsed, and
  whether its holder ever changed;
- ``big``: per big schedule, the boundaries fired (the catch-up is capped at 64, the rest
  skipped) and whether any boundary was fired twice.

The test suite runs the issue's case through ``run`` (``tests/postgres/test_big_tick.py``); by
hand::

    .venv/bin/python bench/big_tick.py [--dsn URL] [--incompressible] [--schedules 20] [--mb 1] [--behind 70]

Figures are recorded in ADR 017.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import multiprocessing
import random
import resource
import statistics
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from _bench import DEFAULT_DSN
from psycopg import sql

import alkstore
from alkstore import Fire, ManualClock, StopToken, Store

SCHEDULER_LOCK = "__alkstore_scheduler"
#: How long the leader keeps leading once every big schedule fires live.
LIVE_S = 4.0
#: The most a run may take before the leader stops anyway (wall seconds).
RUN_LIMIT_S = 240.0


@dataclass(frozen=True)
class Case:
    """The shape of one run."""

    schedules: int = 20
    payload_bytes: int = 1_000_000
    behind_s: int = 70
    incompressible: bool = False


def payload(index: int, size: int, incompressible: bool) -> dict[str, Any]:
    """A JSON payload of about ``size`` bytes: random base64 text, or repetitive text the database compresses."""
    rng = random.Random(index)
    if incompressible:
        text = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
    else:
        words = [f"word{rng.randrange(1000)}" for _ in range(200)]
        text = (" ".join(words) * (size // 1000 + 1))[:size]
    return {"schedule": index, "blob": text[: size - 30]}


def prepare(dsn: str, schema: str, case: Case) -> None:
    """Register the big schedules as if ``behind_s`` ago, and the small one now (database time)."""
    with alkstore.open(dsn, schema=schema, migrate=True, max_size=2) as store:
        now = store.clock.now()
        past = Store(store.engine, clock=ManualClock(now - timedelta(seconds=case.behind_s)))
        for index in range(case.schedules):
            past.schedule(
                f"big-{index:02}", "@every 1s", "big", payload(index, case.payload_bytes, case.incompressible)
            )
        store.schedule("small", "@every 1s", "small", {"small": True})


def lead(dsn: str, schema: str, big: int, results: Any) -> None:
    """The child: lead with the database's clock until caught up and live for ``LIVE_S``; report."""
    report: dict[str, Any] = {}
    with alkstore.open(dsn, schema=schema, max_size=2) as store:
        report["rss_at_open_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        clock, stop = store.clock, StopToken()
        started = clock.now()
        fires: list[tuple[str, datetime, datetime]] = []
        live: set[str] = set()
        caught_up: list[datetime] = []

        def on_fire(fire: Fire) -> None:
            fired_at = clock.now()
            fires.append((fire.schedule, fire.boundary, fired_at))
            if fire.schedule.startswith("big-") and fire.boundary > started:
                live.add(fire.schedule)
                if len(live) == big and not caught_up:
                    caught_up.append(fired_at)
                    threading.Timer(LIVE_S, stop.cancel).start()

        limit = threading.Timer(RUN_LIMIT_S, stop.cancel)
        limit.start()
        try:
            store.run_schedules(stop, on_fire)
        except alkstore.AlkstoreError as exc:
            report["error"] = repr(exc)
        finally:
            limit.cancel()
        first_tick = [fired_at for name, boundary, fired_at in fires if name.startswith("big-") and boundary <= started]
        report.update(
            started=started.isoformat(),
            catch_up_s=(max(first_tick) - started).total_seconds() if first_tick else None,
            catch_up_fires=len(first_tick),
            fires=[(name, boundary.isoformat(), fired_at.isoformat()) for name, boundary, fired_at in fires],
        )
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results.put(report)


@dataclass
class LeaseWatch:
    """What a watcher saw of the scheduler lease, every 0.2 s from its own connection."""

    looks: int = 0
    renewals: int = 0
    lapsed: int = 0  # looks at which the lease's end had passed on the server's clock
    holders: int = 0


def watch_lease(dsn: str, schema: str, stop: threading.Event, seen: LeaseWatch) -> None:
    query = sql.SQL(
        "SELECT owner, token, expires_at, expires_at <= clock_timestamp() FROM {}.locks WHERE name = %(name)s"
    ).format(sql.Identifier(schema))
    holders: set[tuple[str, int]] = set()
    last: datetime | None = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.wait(0.2):
            row = conn.execute(query, {"name": SCHEDULER_LOCK}).fetchone()
            if row is None:
                continue
            owner, token, expires_at, lapsed = row
            seen.looks += 1
            holders.add((owner, token))
            seen.lapsed += bool(lapsed)
            if last is not None and expires_at != last:
                seen.renewals += 1
            last = expires_at
    seen.holders = len(holders)


def run(dsn: str, case: Case) -> dict[str, Any]:
    """One run of ``case`` on a fresh schema (dropped afterwards); the report described above."""
    schema = f"bigtick_{uuid.uuid4().hex[:12]}"
    try:
        prepare(dsn, schema, case)
        results: Any = multiprocessing.get_context("spawn").Queue()
        child = multiprocessing.get_context("spawn").Process(target=lead, args=(dsn, schema, case.schedules, results))
        seen, stop = LeaseWatch(), threading.Event()
        watcher = threading.Thread(target=watch_lease, args=(dsn, schema, stop, seen), daemon=True)
        watcher.start()
        child.start()
        report: dict[str, Any] = results.get(timeout=RUN_LIMIT_S + 60)
        child.join(60)
        stop.set()
        watcher.join(10)
        report["lease"] = asdict(seen)
        report["stored"] = _stored(dsn, schema)
        return _summarised(report, case)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _stored(dsn: str, schema: str) -> dict[str, Any]:
    """What the fired jobs in the database say: per schedule, boundaries fired and any fired twice."""
    query = sql.SQL(
        "SELECT schedule, count(*), count(DISTINCT boundary), min(boundary), max(boundary), sum(length(payload))"
        " FROM {}.jobs WHERE schedule IS NOT NULL GROUP BY schedule ORDER BY schedule"
    ).format(sql.Identifier(schema))
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(query, {}).fetchall()
    return {
        name: {
            "jobs": int(jobs),
            "distinct_boundaries": int(distinct),
            "span_s": (last - first).total_seconds(),
            "payload_mb": int(size) / 1e6,
        }
        for name, jobs, distinct, first, last, size in rows
    }


def _summarised(report: dict[str, Any], case: Case) -> dict[str, Any]:
    fires = [(name, datetime.fromisoformat(b), datetime.fromisoformat(f)) for name, b, f in report.pop("fires")]
    small = sorted((boundary, fired_at) for name, boundary, fired_at in fires if name == "small")
    late = [(fired_at - boundary).total_seconds() for boundary, fired_at in small]
    gaps = sum(1 for (a, _), (b, _) in itertools.pairwise(small) if b - a != timedelta(seconds=1))
    started = datetime.fromisoformat(report["started"])
    per_big = Counter(name for name, boundary, _ in fires if name.startswith("big-") and boundary <= started)
    report["small"] = {
        "fires": len(small),
        "late_max_s": max(late, default=None),
        "late_median_s": statistics.median(late) if late else None,
        "missed_boundaries": gaps,
    }
    report["big_catch_up_fires"] = sorted(set(per_big.values()))
    report["case"] = asdict(case)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--schedules", type=int, default=Case.schedules)
    parser.add_argument("--mb", type=float, default=Case.payload_bytes / 1e6)
    parser.add_argument("--behind", type=int, default=Case.behind_s)
    parser.add_argument("--incompressible", action="store_true")
    args = parser.parse_args()
    case = Case(args.schedules, int(args.mb * 1e6), args.behind, args.incompressible)
    began = time.monotonic()
    report = run(args.dsn, case)
    report["wall_s"] = round(time.monotonic() - began, 1)
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
