"""``alkstore status``: the queues, outboxes, schedules, the scheduler's leader and recent workers, once or
``--watch``.

An outbox's messages are the jobs of its backing queue (``QueueStats.outbox`` names it): the text
shows them in a table of their own, with the workers seen delivering each (its couriers, ADR 057),
and says so when messages wait and no worker delivers them; ``--json`` lists them under
``outboxes`` too.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alkstore import STATS_CAP, DatabaseUnavailable, Leader, QueueStats, Schedule, Store, WorkerInfo

from . import _operate
from ._args import add_command, positive_duration, watch_seconds, with_json
from ._exits import EXIT_OK
from ._output import Column, capped, count, dump, fit, iso, span, table, when
from ._schedules import schedule_json, schedule_lines
from ._signals import Interrupts

__all__ = ["DEFAULT_WITHIN", "Snapshot", "add_commands", "snapshot", "status_json", "status_text"]

#: Workers listed by ``status``: those seen within this many seconds, unless ``--within`` says.
DEFAULT_WITHIN = 60.0
_WATCH_POLL_SECONDS = 0.1
_CLEAR = "\x1b[H\x1b[2J"

_QUEUE_COLUMNS = (
    Column("QUEUE", 21, whole=True),
    Column("READY", 9, right=True),
    Column("DELAYED", 9, right=True),
    Column("WAITING", 9, right=True),
    Column("RUNNING", 9, right=True),
    Column("DEAD", 9, right=True),
    Column("LAG", 7, right=True),
)
_OUTBOX_COLUMNS = (
    Column("OUTBOX", 21),
    Column("READY", 9, right=True),
    Column("DELAYED", 9, right=True),
    Column("RUNNING", 9, right=True),
    Column("DEAD", 9, right=True),
    Column("LAG", 7, right=True),
    Column("COURIERS", 8, right=True),
)
_WORKER_COLUMNS = (
    Column("WORKER", 14),
    Column("HOST", 10),
    Column("PID", 7, right=True),
    Column("QUEUES", 12),
    Column("BUSY", 7, right=True),
    Column("DONE", 8, right=True),
    Column("FAILED", 6, right=True),
    Column("SEEN", 6, right=True),
)


@dataclass(frozen=True)
class Snapshot:
    """What ``alkstore status`` shows, read from one store."""

    at: datetime
    where: str
    queues: list[QueueStats]
    schedules: list[Schedule]
    leader: Leader | None
    workers: list[WorkerInfo]
    within: float


def snapshot(store: Store, where: str, within: float = DEFAULT_WITHIN, *, exact: bool = False) -> Snapshot:
    """Read the queues (counts up to ``Store.queue_stats``' cap unless ``exact``), schedules, leader and
    recent workers of ``store``."""
    queues = store.queue_stats(cap=None) if exact else store.queue_stats()
    schedules = store.schedules()
    leader = store.leader()
    workers = store.workers(within)
    return Snapshot(store.clock.now(), where, queues, schedules, leader, workers, within)


def couriers(shot: Snapshot, stats: QueueStats) -> int:
    """How many of the workers seen deliver the outbox ``stats`` counts (serve its backing queue)."""
    return sum(stats.queue in worker.queues for worker in shot.workers)


def status_json(shot: Snapshot) -> dict[str, Any]:
    """The ``status --json`` document (see ``docs/operations.md``)."""
    return {
        "at": iso(shot.at),
        "queues": [
            {
                "queue": stats.queue,
                "ready": stats.ready,
                "delayed": stats.delayed,
                "waiting": stats.waiting,
                "running": stats.running,
                "dead": stats.dead,
                "lag_seconds": stats.lag.total_seconds(),
                "cap": stats.cap,
                "paused": stats.paused,
            }
            for stats in shot.queues
        ],
        "outboxes": [
            {
                "outbox": stats.outbox,
                "queue": stats.queue,
                "ready": stats.ready,
                "delayed": stats.delayed,
                "running": stats.running,
                "dead": stats.dead,
                "lag_seconds": stats.lag.total_seconds(),
                "cap": stats.cap,
                "couriers": couriers(shot, stats),
            }
            for stats in shot.queues
            if stats.outbox is not None
        ],
        "schedules": [schedule_json(schedule) for schedule in shot.schedules],
        "leader": None
        if shot.leader is None
        else {"owner": shot.leader.owner, "lease_until": iso(shot.leader.lease_until)},
        "workers": [_worker_json(worker) for worker in shot.workers],
    }


def _worker_json(worker: WorkerInfo) -> dict[str, Any]:
    """A worker's fields by name, instants in ISO 8601 and its queues as a list."""
    fields = dataclasses.asdict(worker)
    return {name: iso(value) if isinstance(value, datetime) else value for name, value in fields.items()} | {
        "queues": list(worker.queues)
    }


def status_text(shot: Snapshot) -> str:
    """The ``status`` tables, each line at most 79 characters unless a queue's or schedule's name is long."""
    lines = [f"alkstore status at {when(shot.at)} UTC", fit(shot.where, 79), ""]
    plain = [s for s in shot.queues if s.outbox is None]
    if plain:
        queues = [
            (
                f"{s.queue} (paused)" if s.paused else s.queue,
                *(capped(n, s.cap) for n in (s.ready, s.delayed, s.waiting, s.running, s.dead)),
                span(s.lag),
            )
            for s in plain
        ]
        lines += table(_QUEUE_COLUMNS, queues)
    else:
        lines.append("no jobs in any queue")
    lines.append("")
    outboxes = [s for s in shot.queues if s.outbox is not None]
    if outboxes:
        lines += _outbox_lines(shot, outboxes)
        lines.append("")
    lines += schedule_lines(shot.schedules) if shot.schedules else ["no schedules"]
    lines.append("")
    if shot.leader is None:
        lines.append("leader: none (no scheduler holds the lease)")
    else:
        tail = f", lease ends in {span(shot.leader.lease_until - shot.at)}"
        lines.append(f"leader: {fit(shot.leader.owner, 79 - len('leader: ') - len(tail))}{tail}")
    lines.append("")
    if shot.workers:
        workers = [
            (
                w.id,
                w.host,
                w.pid,
                ",".join(w.queues),
                f"{count(w.running, 3)}/{count(w.concurrency, 3)}",
                count(w.processed, 8),
                count(w.failed, 6),
                span(shot.at - w.seen_at),
            )
            for w in shot.workers
        ]
        lines += table(_WORKER_COLUMNS, workers)
    else:
        lines.append(f"no workers seen in the last {shot.within:g} s")
    return "\n".join(lines)


def _outbox_lines(shot: Snapshot, outboxes: list[QueueStats]) -> list[str]:
    """The outboxes' table, and a line for each whose messages wait while no worker seen delivers it."""
    rows = [
        (
            f"{s.outbox} (paused)" if s.paused else s.outbox,
            *(capped(n, s.cap) for n in (s.ready, s.delayed, s.running, s.dead)),
            span(s.lag),
            count(couriers(shot, s), 8),
        )
        for s in outboxes
    ]
    lines = table(_OUTBOX_COLUMNS, rows)
    for s in outboxes:
        if (s.ready or s.delayed) and not couriers(shot, s):
            lines.append(fit(f"outbox {s.outbox!r}: no worker delivers it (see @tasks.courier)", 79))
    return lines


def _status(args: argparse.Namespace) -> int:
    where = _operate.where(args.url, args.schema)
    with _operate.open_store(args.url, args.schema) as store:
        if args.watch is None:
            shot = snapshot(store, where, args.within, exact=args.exact)
            if args.json:
                dump(status_json(shot), sys.stdout)
            else:
                print(status_text(shot), flush=True)
            return EXIT_OK
        return _watch(store, where, args)


def _watch(store: Store, where: str, args: argparse.Namespace) -> int:
    """Show the status every ``args.watch`` seconds until SIGINT or SIGTERM (then exit 0).

    A terminal is redrawn in place; other output gets one report after another (JSON: one
    document a line). An unavailable database is reported and asked again next time.
    """
    out = sys.stdout
    redraw = out.isatty() and not args.json
    with Interrupts((signal.SIGINT, signal.SIGTERM)) as interrupts:
        first = True
        while not interrupts.count:
            try:
                shot = snapshot(store, where, args.within, exact=args.exact)
            except DatabaseUnavailable as exc:
                print(f"alkstore: {' '.join(str(exc).split())}; asking again in {args.watch:g} s", file=sys.stderr)
            else:
                if args.json:
                    dump(status_json(shot), out, compact=True)
                else:
                    prefix = _CLEAR if redraw else ("" if first else "\n")
                    print(prefix + status_text(shot), file=out, flush=True)
                first = False
            deadline = time.monotonic() + args.watch
            while not interrupts.count and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(left, _WATCH_POLL_SECONDS))
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``status`` on ``commands``."""
    status = with_json(
        add_command(
            commands,
            "status",
            "show queues (counts and lag), schedules, the scheduler's leader and recent workers",
            _status,
            description="Show each queue's ready, delayed, running and dead jobs and its lag (how long the oldest "
            "ready job has waited), the schedules with their next and last boundaries, the scheduler's leader and "
            "the workers seen recently.",
        )
    )
    status.add_argument(
        "--watch", type=watch_seconds, metavar="SECONDS", help="show it again every SECONDS until Ctrl-C"
    )
    status.add_argument(
        "--exact",
        action="store_true",
        help=f"count every job (default: counts stop at {STATS_CAP}, shown as {STATS_CAP}+, which keeps a poll cheap)",
    )
    status.add_argument(
        "--within",
        type=positive_duration,
        default=DEFAULT_WITHIN,
        metavar="DURATION",
        help=f"list the workers seen within DURATION (default: {DEFAULT_WITHIN:g}s)",
    )
