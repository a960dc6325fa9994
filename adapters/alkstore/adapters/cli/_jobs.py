"""``alkstore jobs`` list, show, requeue, cancel, skip-step and purge: a queue's jobs, or some by id."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from alkstore import CancelOutcome, JobInfo, JobPhase, JobResult, JobState

from . import _operate
from ._args import add_command, duration_text, integer, job_id, parse_duration, with_json
from ._exits import EXIT_ERROR, EXIT_OK
from ._output import Column, dump, iso, payload_json, payload_text, table, when

__all__ = ["DONE", "add_commands", "job_json", "purged", "result_json"]

#: The state ``jobs list`` and ``jobs show`` give a job whose outcome its queue kept (ADR 042).
DONE = "done"

#: What the AT and DETAIL columns of a listing show, by phase.
_LISTING: dict[JobPhase, tuple[str, Callable[[JobInfo], datetime | None], str, Callable[[JobInfo], str]]] = {
    JobPhase.READY: ("RUN AT (UTC)", lambda job: job.run_at, "PAYLOAD", lambda job: payload_text(job.payload)),
    JobPhase.DELAYED: ("RUN AT (UTC)", lambda job: job.run_at, "PAYLOAD", lambda job: payload_text(job.payload)),
    JobPhase.WAITING: ("RUN AT (UTC)", lambda job: job.run_at, "PAYLOAD", lambda job: payload_text(job.payload)),
    JobPhase.RUNNING: ("LEASE UNTIL (UTC)", lambda job: job.lease_until, "WORKER", lambda job: job.worker_id or "-"),
    JobPhase.DEAD: ("DIED AT (UTC)", lambda job: job.died_at, "ERROR", lambda job: job.last_error or "-"),
}


def job_json(job: JobInfo) -> dict[str, Any]:
    """One job in JSON output (see ``docs/operations.md``)."""
    return {
        "id": job.id,
        "queue": job.queue,
        "state": job.state.value,
        "priority": job.priority,
        "run_at": iso(job.run_at),
        "expires_at": iso(job.expires_at),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "last_error": job.last_error,
        "schedule": job.schedule,
        "boundary": iso(job.boundary),
        "enqueued_at": iso(job.enqueued_at),
        "worker_id": job.worker_id,
        "lease_until": iso(job.lease_until),
        "died_at": iso(job.died_at),
        "task": job.task,
        "last_traceback": job.last_traceback,
        "trace": job.trace,
        "waits_for": None
        if job.waits_for is None
        else {"until": iso(job.waits_for.until), "event": job.waits_for.event},
        "steps": [{"name": step.name, "at": iso(step.at)} for step in job.steps],
        **_dependencies(job),
        **payload_json(job.payload),
    }


def _dependencies(job: JobInfo) -> dict[str, Any]:
    """A job's parents, what it still waits for and the jobs waiting on it (ADR 073), when it has any."""
    if not (job.parents or job.children):
        return {}
    return {"parents": list(job.parents), "waiting_on": list(job.waiting_on), "children": list(job.children)}


def result_json(result: JobResult) -> dict[str, Any]:
    """One kept result in JSON output: the job as it ended, its result and its earlier failures."""
    return {
        "id": result.id,
        "queue": result.queue,
        "state": DONE,
        "task": result.task,
        "attempts": result.attempts,
        "max_attempts": result.max_attempts,
        "enqueued_at": iso(result.enqueued_at),
        "started_at": iso(result.started_at),
        "finished_at": iso(result.finished_at),
        "keep_until": iso(result.keep_until),
        "worker_ids": list(result.worker_ids),
        "errors": [
            {
                "error": failed.error,
                "exception": failed.exception,
                "traceback": failed.traceback,
                "worker_id": failed.worker_id,
                "failed_at": iso(failed.failed_at),
            }
            for failed in result.errors
        ],
        **payload_json(result.payload),
        **{f"result{key[len('payload') :]}": value for key, value in payload_json(result.result).items()},
    }


def purged(queue: str, count: int, older_than: float) -> str:
    """One line for a queue's purge."""
    age = f" that died at least {duration_text(older_than)} ago" if older_than else ""
    return f"purged {count} dead job{'' if count == 1 else 's'} of {queue!r}{age}"


def _list(args: argparse.Namespace) -> int:
    if args.state == DONE:
        return _list_done(args)
    phase = JobPhase(args.state)
    with _operate.open_store(args.url, args.schema) as store:
        page = store.jobs(args.queue, phase, limit=args.limit, cursor=args.cursor)
    if args.json:
        dump(
            {
                "queue": args.queue,
                "state": phase.value,
                "jobs": [job_json(job) for job in page.jobs],
                "cursor": page.cursor,
            },
            sys.stdout,
        )
        return EXIT_OK
    if not page.jobs:
        print(f"no {phase.value} jobs on {args.queue!r}")
        return EXIT_OK
    at_header, at, detail_header, detail = _LISTING[phase]
    columns = (
        Column("ID", 10, right=True),
        Column("PRI", 6, right=True),
        Column("TRIES", 7),
        Column(at_header, 19),
        Column(detail_header, 32),
    )
    rows = [
        (job.id, job.priority, f"{job.attempts}/{job.max_attempts}", when(at(job)), detail(job)) for job in page.jobs
    ]
    print("\n".join(table(columns, rows)))
    if page.cursor is not None:
        print(f"\nmore: add --cursor {page.cursor}")
    return EXIT_OK


def _list_done(args: argparse.Namespace) -> int:
    """``jobs list --state done``: the queue's kept results, newest first."""
    with _operate.open_store(args.url, args.schema) as store:
        page = store.results(args.queue, limit=args.limit, cursor=args.cursor)
    if args.json:
        results = [result_json(result) for result in page.results]
        dump({"queue": args.queue, "state": DONE, "jobs": results, "cursor": page.cursor}, sys.stdout)
        return EXIT_OK
    if not page.results:
        print(f"no {DONE} jobs kept on {args.queue!r}")
        return EXIT_OK
    columns = (
        Column("ID", 10, right=True),
        Column("TRIES", 7),
        Column("FINISHED AT (UTC)", 19),
        Column("RESULT", 32),
    )
    rows = [
        (result.id, f"{result.attempts}/{result.max_attempts}", when(result.finished_at), payload_text(result.result))
        for result in page.results
    ]
    print("\n".join(table(columns, rows)))
    if page.cursor is not None:
        print(f"\nmore: add --cursor {page.cursor}")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        job = store.get_job(args.id)
        result = store.result(args.id) if job is None else None
    values: dict[str, Any]
    if job is not None:
        fields, values = job_json(job), {"payload": job.payload}
    elif result is not None:
        fields, values = result_json(result), {"payload": result.payload, "result": result.result}
    else:
        print(f"alkstore: no job {args.id} (done and gone, cancelled, purged, or never stored)", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        dump(fields, sys.stdout)
        return EXIT_OK
    for name in values:
        del fields[name], fields[f"{name}_base64"]
    width = max(len(name) for name in fields)
    for name, value in fields.items():
        _field(name, width, _text(value))
    for name, value in values.items():
        if isinstance(value, bytes | bytearray | memoryview):
            _field(name, width, f"<{len(value)} bytes, base64> {payload_json(value)['payload_base64']}")
        else:
            _field(name, width, json.dumps(value, ensure_ascii=False, indent=2, default=repr))
    return EXIT_OK


def _text(value: Any) -> str:
    """A field's value as ``jobs show`` prints it: ``-`` for none; each failed attempt of a kept result on
    lines of its own."""
    if value is None or value == []:
        return "-"
    if isinstance(value, dict) and "until" in value:  # what a sleeping job waits for (ADR 069)
        return f"event {value['event']!r} until {value['until']}" if value["event"] else f"until {value['until']}"
    if isinstance(value, list) and all(isinstance(item, dict) and "name" in item for item in value):
        return "\n".join(f"{item['at']} {item['name']}" for item in value)  # finished steps, oldest first
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return "\n".join(
            f"{item['failed_at']} {item['worker_id'] or '-'} {item['exception'] or '-'}: {item['error']}"
            + ("\n" + item["traceback"].rstrip("\n") if item["traceback"] else "")
            for item in value
        )
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value).rstrip("\n")


def _field(name: str, width: int, text: str) -> None:
    """One field of ``jobs show``: its name, then its text, continued lines indented under it."""
    print(f"{name:<{width}}  " + text.replace("\n", "\n" + " " * (width + 2)))


def _requeue(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        if args.queue is not None:
            count = store.requeue_dead_queue(args.queue)
            if args.json:
                dump({"queue": args.queue, "requeued": count}, sys.stdout)
            else:
                print(f"requeued {count} dead job{'' if count == 1 else 's'} of {args.queue!r}")
            return EXIT_OK
        requeued = store.requeue_dead_many(args.ids)
    left = sorted(set(args.ids) - set(requeued))
    if args.json:
        dump({"requeued": requeued, "not_dead": left}, sys.stdout)
    else:
        for ident in requeued:
            print(f"job {ident}: requeued")
        for ident in left:
            print(f"job {ident}: not dead, left alone")
    return EXIT_ERROR if left else EXIT_OK


_CANCEL_NOTES = {
    CancelOutcome.CANCELLED: "cancelled",
    CancelOutcome.CANCELLING: "running: its worker is told to stop it, and it ends cancelled",
    CancelOutcome.DEAD: "dead, not cancelled (purge or requeue it)",
    CancelOutcome.MISSING: "no such job (done and gone, cancelled, or never stored)",
}


def _cancel(args: argparse.Namespace) -> int:
    outcomes: dict[int, CancelOutcome] = {}
    with _operate.open_store(args.url, args.schema) as store:
        for ident in dict.fromkeys(args.ids):
            outcomes[ident] = store.cancel(ident)
    if args.json:
        dump({str(ident): outcome.value for ident, outcome in outcomes.items()}, sys.stdout)
    else:
        for ident, outcome in outcomes.items():
            print(f"job {ident}: {_CANCEL_NOTES[outcome]}")
    done = (CancelOutcome.CANCELLED, CancelOutcome.CANCELLING)
    return EXIT_OK if all(outcome in done for outcome in outcomes.values()) else EXIT_ERROR


def _skip_step(args: argparse.Namespace) -> int:
    """``jobs skip-step``: a step of a job nobody holds stored as finished with the operator's result (ADR 077)."""
    try:
        result = json.loads(args.result)
    except ValueError as exc:
        print(f"alkstore: --result is not JSON: {exc}", file=sys.stderr)
        return EXIT_ERROR
    with _operate.open_store(args.url, args.schema) as store:
        state = store.skip_step(args.id, args.name, result)
    if args.json:
        dump({"id": args.id, "step": args.name, "state": state.value}, sys.stdout)
    else:
        then = "requeue it to run it" if state is JobState.DEAD else "its next run gets this result"
        print(f"job {args.id}: step {args.name!r} stored as finished ({state.value}: {then})")
    return EXIT_OK


def _purge(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        count = store.purge_dead(args.queue, args.older_than)
    if args.json:
        dump({"queue": args.queue, "purged": count}, sys.stdout)
    else:
        print(purged(args.queue, count, args.older_than))
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``jobs list``, ``show``, ``requeue``, ``cancel``, ``skip-step`` and ``purge`` on ``commands``."""
    jobs = commands.add_parser(
        "jobs",
        help="list, show, requeue, cancel, skip a step of, or purge jobs",
        description="Inspect and act on jobs.",
    )
    actions = jobs.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = with_json(add_command(actions, "list", "list a queue's jobs in one state, a page at a time", _list))
    listing.add_argument("queue", help="the queue (an outbox's backing queue as status shows it)")
    listing.add_argument(
        "--state",
        choices=[*(phase.value for phase in JobPhase), DONE],
        default=JobPhase.READY.value,
        help="ready (default: in claim order), delayed (soonest first), running (by id), dead (newest first) "
        "or done (the kept results of a queue that keeps them, newest first)",
    )
    listing.add_argument("--limit", type=integer, default=50, help="jobs per page, 1 to 1000 (default: 50)")
    listing.add_argument("--cursor", help="the cursor a previous page printed, for the next page")
    show = with_json(add_command(actions, "show", "show one job (or its kept result), its payload decoded", _show))
    show.add_argument("id", type=job_id)
    requeue = with_json(
        add_command(actions, "requeue", "bring dead jobs back to their queues with 0 attempts", _requeue)
    )
    which = requeue.add_mutually_exclusive_group(required=True)
    which.add_argument("ids", nargs="*", type=job_id, default=[], metavar="ID", help="dead jobs to requeue")
    which.add_argument("--queue", help="requeue every dead job of this queue")
    cancel = with_json(
        add_command(
            actions,
            "cancel",
            "cancel pending jobs (a running job is never cancelled)",
            _cancel,
            description="Delete pending (ready or delayed) jobs. A running, dead or missing job is left alone and "
            "reported; the exit status is 1 unless every job given was cancelled.",
        )
    )
    cancel.add_argument("ids", nargs="+", type=job_id, metavar="ID")
    skip = with_json(
        add_command(
            actions,
            "skip-step",
            "store a step of a job as finished with a result, so its next run does not run it",
            _skip_step,
            description="Store the step NAME of a pending, waiting or dead job as finished with RESULT (JSON): "
            "the job's next run gets RESULT from job.step(NAME, ...) instead of running the step, and a step of "
            "that name stored already is replaced. A running job (exit status 1) is left alone, as is a job "
            "stored nowhere.",
        )
    )
    skip.add_argument("id", type=job_id, metavar="ID")
    skip.add_argument("name", metavar="NAME", help="the step's name, as the task's job.step names it")
    skip.add_argument("--result", default="null", metavar="JSON", help="the step's result as JSON (default: null)")
    purge = with_json(add_command(actions, "purge", "delete a queue's dead jobs that died long enough ago", _purge))
    purge.add_argument("queue")
    purge.add_argument(
        "--older-than",
        type=parse_duration,
        required=True,
        metavar="DURATION",
        help="only those that died at least DURATION ago (e.g. 7d, 12h, 90s; 0 for all)",
    )
