"""``alkstore status``, ``jobs``, ``schedules`` and ``healthcheck``: inspecting and acting on a database.

Every command reads or acts through the public ``Store`` API (ADR 020). Text output fits 80
columns; ``--json`` output has the stable shapes documented in ``docs/operations.md`` (keys
are only ever added). Instants in JSON are ISO 8601 in UTC; durations are seconds.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import math
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TextIO

from alkstore import (
    DEFAULT_DEAD_RETENTION,
    STATS_CAP,
    CancelOutcome,
    DatabaseError,
    DatabaseUnavailable,
    Every,
    JobInfo,
    JobPhase,
    Leader,
    QueueStats,
    Schedule,
    ScheduleOpts,
    SchemaOutOfDate,
    Store,
    WorkerInfo,
)

from . import _operate
from ._signals import Interrupts

__all__ = [
    "DEFAULT_WITHIN",
    "Snapshot",
    "add_commands",
    "job_json",
    "parse_duration",
    "snapshot",
    "status_json",
    "status_text",
]

#: Workers listed by ``status``: those seen within this many seconds, unless ``--within`` says.
DEFAULT_WITHIN = 60.0
#: The longest ``--watch`` period or duration argument accepted (a day, or a hundred years).
_MAX_WATCH_SECONDS = 86400.0
_MAX_DURATION_SECONDS = 36500 * 86400.0
_WATCH_POLL_SECONDS = 0.1
_CLEAR = "\x1b[H\x1b[2J"
#: The suffixes of large counts in tables.
_UNITS = (("k", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("P", 10**15))
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)", re.ASCII)

#: Exit statuses (the command line's own, restated to keep this module free of _main).
_OK = 0
_FAILED = 1

AddDatabaseArguments = Callable[[argparse.ArgumentParser], None]


# -- argument types ----------------------------------------------------------------------------


def parse_duration(text: str, *, allow_zero: bool = True, limit: float = _MAX_DURATION_SECONDS) -> float:
    """Seconds from ``90``, ``1.5``, ``90s``, ``15m``, ``12h`` or ``7d`` (``ArgumentTypeError`` otherwise)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration (seconds, or a number and s, m, h or d): {text!r}")
    seconds = float(match.group(1)) * Every.UNIT_SECONDS.get(match.group(2) or "s", 1)
    if not math.isfinite(seconds) or seconds > limit or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"the duration must be {bound} and at most {limit:g} s, not {text!r}")
    return seconds


def _watch_seconds(text: str) -> float:
    return parse_duration(text, allow_zero=False, limit=_MAX_WATCH_SECONDS)


def _positive_duration(text: str) -> float:
    return parse_duration(text, allow_zero=False)


def _job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a job id is a positive integer, not {text}")
    return value


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


# -- formatting --------------------------------------------------------------------------------


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


def _when(instant: datetime | None) -> str:
    """An instant as a table shows it: UTC to the second."""
    return "-" if instant is None else instant.strftime("%Y-%m-%d %H:%M:%S")


def _span(delta: timedelta) -> str:
    """A duration in at most 7 characters: ``0s``, ``12.3s``, ``4m05s``, ``3h12m``, ``2d04h``."""
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 60:
        return "0s" if seconds == 0 else f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    days = whole // 86400
    return f"{days}d{whole % 86400 // 3600:02d}h" if days < 100 else f"{days}d"


def _duration_text(seconds: float) -> str:
    """A duration as given on the command line: ``7d``, ``12h``, ``15m`` when whole, else seconds."""
    for unit in ("d", "h", "m"):
        size = Every.UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _count(value: int, width: int) -> str:
    """A count in at most ``width`` characters where it fits: as is, else in its unit (k, M, G, T, P)."""
    text = str(value)
    if len(text) <= width:
        return text
    suffix, scale = next((unit for unit in reversed(_UNITS) if value >= unit[1]), _UNITS[0])
    short = f"{value / scale:.1f}{suffix}"
    return short if len(short) <= width else f"{value // scale}{suffix}"


def _capped(count: int, cap: int | None) -> str:
    """A queue table's count: ``10000+`` where counting stopped at the cap."""
    return _count(count, 8) + "+" if cap is not None and count >= cap else _count(count, 9)


def _fit(text: str, width: int) -> str:
    """``text`` on one line (an error's line breaks and tabs become spaces), cut to ``width`` characters,
    an ellipsis marking a cut."""
    if not text.isprintable():
        text = "".join(char if char.isprintable() else " " for char in text)
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class _Column:
    header: str
    width: int
    right: bool = False


def _table(columns: Sequence[_Column], rows: Sequence[Sequence[object]], gap: int = 1) -> list[str]:
    """Lines of a table: a header, then a row per row, each cell cut to its column, ``gap`` spaces apart."""

    def line(cells: Sequence[object]) -> str:
        parts = []
        for column, cell in zip(columns, cells, strict=True):
            text = _fit(str(cell), column.width)
            parts.append(text.rjust(column.width) if column.right else text.ljust(column.width))
        return (" " * gap).join(parts).rstrip()

    return [line([column.header for column in columns]), *(line(row) for row in rows)]


def _payload_json(payload: Any) -> dict[str, Any]:
    """A payload in JSON output: the value, or (bytes, or what did not decode) its base64."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return {"payload": None, "payload_base64": base64.b64encode(bytes(payload)).decode("ascii")}
    return {"payload": payload, "payload_base64": None}


def _payload_text(payload: Any) -> str:
    if isinstance(payload, bytes | bytearray | memoryview):
        return f"<{len(payload)} bytes> {bytes(payload)[:24].hex()}"
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=repr)


def _dump(value: Any, out: TextIO, *, compact: bool = False) -> None:
    if compact:
        print(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr), file=out, flush=True)
    else:
        print(json.dumps(value, ensure_ascii=False, indent=2, default=repr), file=out, flush=True)


# -- status ------------------------------------------------------------------------------------


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


def status_json(shot: Snapshot) -> dict[str, Any]:
    """The ``status --json`` document (see ``docs/operations.md``)."""
    return {
        "at": _iso(shot.at),
        "queues": [
            {
                "queue": stats.queue,
                "ready": stats.ready,
                "delayed": stats.delayed,
                "running": stats.running,
                "dead": stats.dead,
                "lag_seconds": stats.lag.total_seconds(),
                "cap": stats.cap,
            }
            for stats in shot.queues
        ],
        "schedules": [_schedule_json(schedule) for schedule in shot.schedules],
        "leader": None
        if shot.leader is None
        else {"owner": shot.leader.owner, "lease_until": _iso(shot.leader.lease_until)},
        "workers": [_worker_json(worker) for worker in shot.workers],
    }


def _worker_json(worker: WorkerInfo) -> dict[str, Any]:
    """A worker's fields by name, instants in ISO 8601 and its queues as a list."""
    fields = dataclasses.asdict(worker)
    return {name: _iso(value) if isinstance(value, datetime) else value for name, value in fields.items()} | {
        "queues": list(worker.queues)
    }


def _schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "name": schedule.name,
        "spec": schedule.spec,
        "queue": schedule.queue,
        "next_boundary": _iso(schedule.next_boundary),
        "last_boundary": _iso(schedule.last_boundary),
        **_payload_json(schedule.payload),
        "priority": schedule.opts.priority,
        "max_attempts": schedule.opts.max_attempts,
        "expires_seconds": None
        if not isinstance(schedule.opts.expires, timedelta)
        else schedule.opts.expires.total_seconds(),
    }


_QUEUE_COLUMNS = (
    _Column("QUEUE", 30),
    _Column("READY", 9, right=True),
    _Column("DELAYED", 9, right=True),
    _Column("RUNNING", 9, right=True),
    _Column("DEAD", 9, right=True),
    _Column("LAG", 7, right=True),
)
_SCHEDULE_COLUMNS = (
    _Column("SCHEDULE", 15),
    _Column("EVERY", 5),
    _Column("QUEUE", 13),
    _Column("NEXT (UTC)", 19),
    _Column("LAST (UTC)", 19),
)
_WORKER_COLUMNS = (
    _Column("WORKER", 14),
    _Column("HOST", 10),
    _Column("PID", 7, right=True),
    _Column("QUEUES", 12),
    _Column("BUSY", 7, right=True),
    _Column("DONE", 8, right=True),
    _Column("FAILED", 6, right=True),
    _Column("SEEN", 6, right=True),
)


def _schedule_lines(schedules: Sequence[Schedule]) -> list[str]:
    rows = [
        (
            schedule.name,
            schedule.spec.removeprefix("@every "),
            schedule.queue,
            _when(schedule.next_boundary),
            _when(schedule.last_boundary),
        )
        for schedule in schedules
    ]
    return _table(_SCHEDULE_COLUMNS, rows, gap=2)


def status_text(shot: Snapshot) -> str:
    """The ``status`` tables, each line at most 79 characters."""
    lines = [f"alkstore status at {_when(shot.at)} UTC", _fit(shot.where, 79), ""]
    if shot.queues:
        queues = [
            (s.queue, *(_capped(n, s.cap) for n in (s.ready, s.delayed, s.running, s.dead)), _span(s.lag))
            for s in shot.queues
        ]
        lines += _table(_QUEUE_COLUMNS, queues)
    else:
        lines.append("no jobs in any queue")
    lines.append("")
    lines += _schedule_lines(shot.schedules) if shot.schedules else ["no schedules"]
    lines.append("")
    if shot.leader is None:
        lines.append("leader: none (no scheduler holds the lease)")
    else:
        tail = f", lease ends in {_span(shot.leader.lease_until - shot.at)}"
        lines.append(f"leader: {_fit(shot.leader.owner, 79 - len('leader: ') - len(tail))}{tail}")
    lines.append("")
    if shot.workers:
        workers = [
            (
                w.id,
                w.host,
                w.pid,
                ",".join(w.queues),
                f"{_count(w.running, 3)}/{_count(w.concurrency, 3)}",
                _count(w.processed, 8),
                _count(w.failed, 6),
                _span(shot.at - w.seen_at),
            )
            for w in shot.workers
        ]
        lines += _table(_WORKER_COLUMNS, workers)
    else:
        lines.append(f"no workers seen in the last {shot.within:g} s")
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    where = _operate.where(args.url, args.schema)
    with _operate.open_store(args.url, args.schema) as store:
        if args.watch is None:
            shot = snapshot(store, where, args.within, exact=args.exact)
            if args.json:
                _dump(status_json(shot), sys.stdout)
            else:
                print(status_text(shot), flush=True)
            return _OK
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
                    _dump(status_json(shot), out, compact=True)
                else:
                    prefix = _CLEAR if redraw else ("" if first else "\n")
                    print(prefix + status_text(shot), file=out, flush=True)
                first = False
            deadline = time.monotonic() + args.watch
            while not interrupts.count and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(left, _WATCH_POLL_SECONDS))
    return _OK


# -- jobs --------------------------------------------------------------------------------------


def job_json(job: JobInfo) -> dict[str, Any]:
    """One job in JSON output (see ``docs/operations.md``)."""
    return {
        "id": job.id,
        "queue": job.queue,
        "state": job.state.value,
        "priority": job.priority,
        "run_at": _iso(job.run_at),
        "expires_at": _iso(job.expires_at),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "last_error": job.last_error,
        "schedule": job.schedule,
        "boundary": _iso(job.boundary),
        "enqueued_at": _iso(job.enqueued_at),
        "worker_id": job.worker_id,
        "lease_until": _iso(job.lease_until),
        "died_at": _iso(job.died_at),
        "task": job.task,
        "last_traceback": job.last_traceback,
        **_payload_json(job.payload),
    }


#: What the AT and DETAIL columns of a listing show, by phase.
_LISTING: dict[JobPhase, tuple[str, Callable[[JobInfo], datetime | None], str, Callable[[JobInfo], str]]] = {
    JobPhase.READY: ("RUN AT (UTC)", lambda job: job.run_at, "PAYLOAD", lambda job: _payload_text(job.payload)),
    JobPhase.DELAYED: ("RUN AT (UTC)", lambda job: job.run_at, "PAYLOAD", lambda job: _payload_text(job.payload)),
    JobPhase.RUNNING: ("LEASE UNTIL (UTC)", lambda job: job.lease_until, "WORKER", lambda job: job.worker_id or "-"),
    JobPhase.DEAD: ("DIED AT (UTC)", lambda job: job.died_at, "ERROR", lambda job: job.last_error or "-"),
}


def _jobs_list(args: argparse.Namespace) -> int:
    phase = JobPhase(args.state)
    with _operate.open_store(args.url, args.schema) as store:
        page = store.jobs(args.queue, phase, limit=args.limit, cursor=args.cursor)
    if args.json:
        _dump(
            {
                "queue": args.queue,
                "state": phase.value,
                "jobs": [job_json(job) for job in page.jobs],
                "cursor": page.cursor,
            },
            sys.stdout,
        )
        return _OK
    if not page.jobs:
        print(f"no {phase.value} jobs on {args.queue!r}")
        return _OK
    at_header, at, detail_header, detail = _LISTING[phase]
    columns = (
        _Column("ID", 10, right=True),
        _Column("PRI", 6, right=True),
        _Column("TRIES", 7),
        _Column(at_header, 19),
        _Column(detail_header, 32),
    )
    rows = [
        (job.id, job.priority, f"{job.attempts}/{job.max_attempts}", _when(at(job)), detail(job)) for job in page.jobs
    ]
    print("\n".join(_table(columns, rows)))
    if page.cursor is not None:
        print(f"\nmore: add --cursor {page.cursor}")
    return _OK


def _jobs_show(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        job = store.get_job(args.id)
    if job is None:
        print(f"alkstore: no job {args.id} (done and gone, cancelled, purged, or never stored)", file=sys.stderr)
        return _FAILED
    if args.json:
        _dump(job_json(job), sys.stdout)
        return _OK
    fields = job_json(job)
    del fields["payload"], fields["payload_base64"]
    width = max(len(name) for name in fields)
    for name, value in fields.items():
        text = "-" if value is None else str(value).rstrip("\n")
        print(f"{name:<{width}}  " + text.replace("\n", "\n" + " " * (width + 2)))
    if isinstance(job.payload, bytes | bytearray | memoryview):
        print(
            f"{'payload':<{width}}  <{len(job.payload)} bytes, base64> {_payload_json(job.payload)['payload_base64']}"
        )
    else:
        text = json.dumps(job.payload, ensure_ascii=False, indent=2, default=repr)
        print(f"{'payload':<{width}}  " + text.replace("\n", "\n" + " " * (width + 2)))
    return _OK


def _jobs_requeue(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        if args.queue is not None:
            count = store.requeue_dead_queue(args.queue)
            if args.json:
                _dump({"queue": args.queue, "requeued": count}, sys.stdout)
            else:
                print(f"requeued {count} dead job{'' if count == 1 else 's'} of {args.queue!r}")
            return _OK
        requeued = store.requeue_dead_many(args.ids)
    left = sorted(set(args.ids) - set(requeued))
    if args.json:
        _dump({"requeued": requeued, "not_dead": left}, sys.stdout)
    else:
        for job_id in requeued:
            print(f"job {job_id}: requeued")
        for job_id in left:
            print(f"job {job_id}: not dead, left alone")
    return _FAILED if left else _OK


def _jobs_cancel(args: argparse.Namespace) -> int:
    outcomes: dict[int, CancelOutcome] = {}
    with _operate.open_store(args.url, args.schema) as store:
        for job_id in dict.fromkeys(args.ids):
            outcomes[job_id] = store.cancel(job_id)
    if args.json:
        _dump({str(job_id): outcome.value for job_id, outcome in outcomes.items()}, sys.stdout)
    else:
        notes = {
            CancelOutcome.CANCELLED: "cancelled",
            CancelOutcome.RUNNING: "running, not cancelled (a worker holds it)",
            CancelOutcome.DEAD: "dead, not cancelled (purge or requeue it)",
            CancelOutcome.MISSING: "no such job (done and gone, cancelled, or never stored)",
        }
        for job_id, outcome in outcomes.items():
            print(f"job {job_id}: {notes[outcome]}")
    return _OK if all(o is CancelOutcome.CANCELLED for o in outcomes.values()) else _FAILED


def _jobs_purge(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        count = store.purge_dead(args.queue, args.older_than)
    if args.json:
        _dump({"queue": args.queue, "purged": count}, sys.stdout)
    else:
        print(_purged(args.queue, count, args.older_than))
    return _OK


def _purged(queue: str, count: int, older_than: float) -> str:
    """One line for a queue's purge."""
    age = f" that died at least {_duration_text(older_than)} ago" if older_than else ""
    return f"purged {count} dead job{'' if count == 1 else 's'} of {queue!r}{age}"


def _prune(args: argparse.Namespace) -> int:
    """``jobs purge`` over every queue holding dead jobs (or the one given), with the retention by default."""
    with _operate.open_store(args.url, args.schema) as store:
        if args.queue is not None:
            queues = [args.queue]
        else:
            queues = [stats.queue for stats in store.queue_stats(cap=1) if stats.dead]
        counts = {queue: store.purge_dead(queue, args.older_than) for queue in queues}
    if args.json:
        _dump({"older_than": args.older_than, "purged": counts}, sys.stdout)
    else:
        for queue, count in counts.items():
            print(_purged(queue, count, args.older_than))
        total = sum(counts.values())
        print(f"pruned {total} dead job{'' if total == 1 else 's'} in all")
    return _OK


# -- schedules ---------------------------------------------------------------------------------


def _schedules_list(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        schedules = store.schedules()
    if args.json:
        _dump([_schedule_json(schedule) for schedule in schedules], sys.stdout)
    elif schedules:
        print("\n".join(_schedule_lines(schedules)))
    else:
        print("no schedules")
    return _OK


def _schedules_add(args: argparse.Namespace) -> int:
    opts = ScheduleOpts(priority=args.priority, max_attempts=args.max_attempts, expires=args.expires)
    with _operate.open_store(args.url, args.schema) as store:
        schedule = store.schedule(args.name, args.spec, args.queue, args.payload, opts)
    if args.json:
        _dump(_schedule_json(schedule), sys.stdout)
    else:
        print(
            f"schedule {schedule.name!r} fires onto {schedule.queue!r} {schedule.spec};"
            f" next boundary {_when(schedule.next_boundary)} UTC"
        )
    return _OK


def _schedules_remove(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        removed = store.unschedule(args.name)
    if args.json:
        _dump({"name": args.name, "removed": removed}, sys.stdout)
    elif removed:
        print(f"removed schedule {args.name!r} (the jobs it fired stay)")
    else:
        print(f"alkstore: no schedule named {args.name!r}", file=sys.stderr)
    return _OK if removed else _FAILED


# -- healthcheck -------------------------------------------------------------------------------


def _healthcheck(args: argparse.Namespace) -> int:
    """Exit 0 when the database answers, its schema is current and (with schedules) a leader leads; else 1."""
    checks: list[tuple[str, bool, str]] = []
    where = _operate.where(args.url, args.schema)
    try:
        store = _operate.open_store(args.url, args.schema)
    except SchemaOutOfDate as exc:
        checks += [("database", True, f"reachable: {where}"), ("schema", False, " ".join(str(exc).split()))]
    except DatabaseError as exc:
        checks.append(("database", False, f"{where}: {' '.join(str(exc).split())}"))
    else:
        with store:
            checks += [("database", True, f"reachable: {where}"), ("schema", True, "current")]
            try:
                checks.append(_leader_check(store))
            except DatabaseError as exc:
                checks.append(("leader", False, f"could not be read: {' '.join(str(exc).split())}"))
    healthy = all(ok for _, ok, _ in checks)
    if args.json:
        _dump(
            {"healthy": healthy, "checks": [{"name": n, "ok": ok, "detail": detail} for n, ok, detail in checks]},
            sys.stdout,
        )
    else:
        for name, ok, detail in checks:
            print(f"{'ok' if ok else 'FAIL':<4}  {name:<8}  {detail}")
        print("healthy" if healthy else "unhealthy")
    return _OK if healthy else _FAILED


def _leader_check(store: Store) -> tuple[str, bool, str]:
    count = len(store.schedules())
    leader = store.leader()
    if leader is not None:
        return ("leader", True, f"{leader.owner}, lease until {_when(leader.lease_until)} UTC")
    if count == 0:
        return ("leader", True, "none needed: no schedules")
    plural = "schedule exists" if count == 1 else "schedules exist"
    return ("leader", False, f"no scheduler leads while {count} {plural} (is `alkstore run-schedules` running?)")


# -- the parsers -------------------------------------------------------------------------------


def add_commands(commands: Any, add_database_arguments: AddDatabaseArguments) -> None:
    """Register ``status``, ``jobs …``, ``prune``, ``schedules …`` and ``healthcheck`` on ``commands``."""

    def leaf(parent: Any, name: str, help_: str, run: Callable[[argparse.Namespace], int], **kw: Any) -> Any:
        command = parent.add_parser(
            name, help=help_, description=kw.pop("description", help_[0].upper() + help_[1:] + ".")
        )
        add_database_arguments(command)
        command.set_defaults(run=run)
        return command

    def with_json(command: Any) -> Any:
        command.add_argument("--json", action="store_true", help="print JSON (shapes: docs/operations.md)")
        return command

    status = with_json(
        leaf(
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
        "--watch", type=_watch_seconds, metavar="SECONDS", help="show it again every SECONDS until Ctrl-C"
    )
    status.add_argument(
        "--exact",
        action="store_true",
        help=f"count every job (default: counts stop at {STATS_CAP}, shown as {STATS_CAP}+, which keeps a poll cheap)",
    )
    status.add_argument(
        "--within",
        type=_positive_duration,
        default=DEFAULT_WITHIN,
        metavar="DURATION",
        help=f"list the workers seen within DURATION (default: {DEFAULT_WITHIN:g}s)",
    )

    jobs = commands.add_parser(
        "jobs", help="list, show, requeue, cancel or purge jobs", description="Inspect and act on jobs."
    )
    actions = jobs.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = with_json(leaf(actions, "list", "list a queue's jobs in one state, a page at a time", _jobs_list))
    listing.add_argument("queue", help="the queue (an outbox's backing queue as status shows it)")
    listing.add_argument(
        "--state",
        choices=[phase.value for phase in JobPhase],
        default=JobPhase.READY.value,
        help="ready (default: in claim order), delayed (soonest first), running (by id) or dead (newest first)",
    )
    listing.add_argument("--limit", type=_int, default=50, help="jobs per page, 1 to 1000 (default: 50)")
    listing.add_argument("--cursor", help="the cursor a previous page printed, for the next page")
    show = with_json(leaf(actions, "show", "show one job, its payload decoded", _jobs_show))
    show.add_argument("id", type=_job_id)
    requeue = with_json(leaf(actions, "requeue", "bring dead jobs back to their queues with 0 attempts", _jobs_requeue))
    which = requeue.add_mutually_exclusive_group(required=True)
    which.add_argument("ids", nargs="*", type=_job_id, default=[], metavar="ID", help="dead jobs to requeue")
    which.add_argument("--queue", help="requeue every dead job of this queue")
    cancel = with_json(
        leaf(
            actions,
            "cancel",
            "cancel pending jobs (a running job is never cancelled)",
            _jobs_cancel,
            description="Delete pending (ready or delayed) jobs. A running, dead or missing job is left alone and "
            "reported; the exit status is 1 unless every job given was cancelled.",
        )
    )
    cancel.add_argument("ids", nargs="+", type=_job_id, metavar="ID")
    purge = with_json(leaf(actions, "purge", "delete a queue's dead jobs that died long enough ago", _jobs_purge))
    purge.add_argument("queue")
    purge.add_argument(
        "--older-than",
        type=parse_duration,
        required=True,
        metavar="DURATION",
        help="only those that died at least DURATION ago (e.g. 7d, 12h, 90s; 0 for all)",
    )

    retention = _duration_text(DEFAULT_DEAD_RETENTION.total_seconds())
    prune = with_json(
        leaf(
            commands,
            "prune",
            f"delete the dead jobs kept longer than the retention (default {retention}) on every queue",
            _prune,
            description="Delete the dead jobs that died at least --older-than ago, on every queue holding dead jobs "
            "(or the one given), a batch at a time: what a worker's maintenance does for its own queues "
            "(Worker(dead_retention=...)), for a cron job or by hand.",
        )
    )
    prune.add_argument(
        "--older-than",
        type=parse_duration,
        default=DEFAULT_DEAD_RETENTION.total_seconds(),
        metavar="DURATION",
        help=f"only those that died at least DURATION ago (default: {retention}; 0 for all)",
    )
    prune.add_argument("--queue", help="this queue's dead jobs alone (default: every queue's)")

    schedules = commands.add_parser(
        "schedules", help="list, add or remove schedules", description="Manage @every schedules."
    )
    verbs = schedules.add_subparsers(dest="action", metavar="ACTION", required=True)
    with_json(leaf(verbs, "list", "list the schedules with their next and last boundaries", _schedules_list))
    add = with_json(leaf(verbs, "add", "register (or update) a schedule", _schedules_add))
    add.add_argument("name")
    add.add_argument("spec", help="@every <n><s|m|h|d>, e.g. '@every 10m'")
    add.add_argument("queue", help="the queue its fires go to")
    add.add_argument("--payload", type=_json_value, help="each fire's payload, as JSON (default: null)")
    add.add_argument("--priority", type=_int)
    add.add_argument("--max-attempts", type=_int)
    add.add_argument("--expires", type=_positive_duration, metavar="DURATION", help="each fire expires after DURATION")
    remove = with_json(leaf(verbs, "remove", "remove a schedule (the jobs it fired stay)", _schedules_remove))
    remove.add_argument("name")

    with_json(
        leaf(
            commands,
            "healthcheck",
            "check the database, its schema and (with schedules) the scheduler's leader; exit 0 or 1",
            _healthcheck,
            description="Exit 0 when the database answers, its schema is current, and a scheduler leads whenever "
            "schedules exist; exit 1 otherwise (and 2 for a usage error), for container health probes.",
        )
    )
