"""The nemesis run's OS processes: producer, worker, scheduler and courier, each logging its own history.

``python -m tests.nemesis.proc ROLE --id ID --url URL --schema S --run DIR --seed N`` (the run
starts them; ``run.py``). Each works in a thread of its own until SIGTERM (a clean stop: the
step in hand finishes); the main thread only waits for signals, so a signal never lands inside
a store call. SIGUSR1 makes a scheduler exhaust its own connection pool for ``HOLD_S`` seconds.
A step the database could not answer (an outage) is not logged and is tried again; only
steps that returned are history.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import alkstore
from alkstore import AsyncJob, DatabaseUnavailable, Fire, Job, StopToken

from . import record
from .history import HistoryWriter, Kind

#: The processes' roles: ``worker`` and ``async-worker`` are thin recorded loops; ``task-worker`` and
#: ``task-async-worker`` run alkstore's ``Worker`` and ``AsyncWorker`` over ``chore``.
ROLES = ("producer", "worker", "async-worker", "task-worker", "task-async-worker", "scheduler", "courier")

__all__ = ["CHORES", "HOLD_S", "OUTBOX", "PULSES", "QUEUE", "ROLES", "SCHEDULE", "SINK", "main", "sink_messages"]

#: The work queue, the outbox, and the schedule with the queue it fires onto (nothing consumes it).
QUEUE = "work"
#: The queue of ``chore`` runs, served by alkstore's own ``Worker`` and ``AsyncWorker``.
CHORES = "chores"
OUTBOX = "events"
SCHEDULE = "pulse"
PULSES = "pulses"
#: Its interval, seconds.
INTERVAL_S = 1.0
#: The work queue's lease: a ``slow`` job's first run sleeps past it.
LEASE_S = 1.5
#: How long an exhausted scheduler keeps every connection of its pool.
HOLD_S = 12.0
#: The couriers' sink: one file per courier, a delivered message id per line.
SINK = "sink"
#: How long a step waits after the database could not answer it.
BACKOFF_S = 0.2
#: Ordering keys of the outbox's messages: one of ``KEYS``, renewed every ``KEY_SPAN`` messages a
#: producer sends (producers at one pace share them), so a long run's keys stay short to check.
KEYS = tuple(f"k{n}" for n in range(5))
KEY_SPAN = 100
#: Job tags by weight: ``ok`` runs and acks; ``fail`` fails its first attempt; ``bury`` fails
#: every attempt (it goes dead); ``slow`` sleeps past its lease on its first attempt, and most
#: of a lease on the next, so the first holder's late ack comes while the next holder runs; ``beat``
#: runs for two leases, heartbeating every 0.4 of one (it stops early once its lease is lost).
TAGS = {"ok": 78, "fail": 14, "bury": 4, "slow": 2, "beat": 2}
#: The most jobs a producer enqueues in one batch.
BATCH = 5
#: How long a task worker asked to stop waits for its runs (longer than any: none is handed back).
TASK_GRACE_S = 10.0
#: Unique jobs: the keys producers share (few, so a key is often still unfinished when the next enqueue
#: of it comes, and returns that job), and their ``max_attempts`` (one for every key, since a returned
#: job keeps the attempts it was stored with).
UNIQUE_KEYS = 20
UNIQUE_ATTEMPTS = 3


#: A chore's run is given up after this (its ``overrun`` tag outlasts it on the first attempt); longer
#: than a ``long`` chore, which runs two leases while its worker heartbeats it.
CHORE_TIMEOUT_S = 4.0
#: Chore tags by weight: as ``TAGS``; ``long`` runs two leases (the worker heartbeats it), ``overrun``
#: runs past its timeout on its first attempt (the worker gives the run up and retries the job).
CHORE_TAGS = {"ok": 76, "fail": 12, "bury": 4, "long": 4, "overrun": 4}
#: The history a task worker's chores log to (one writer per process, set by ``main``).
_history: list[HistoryWriter] = []

T = TypeVar("T")

TASKS = alkstore.Tasks()


@TASKS.task("chore", queue=CHORES, timeout=CHORE_TIMEOUT_S)
def chore(tag: str) -> None:
    """A task run by alkstore's ``Worker`` or ``AsyncWorker``: it logs its claim (fence and lease end, as
    the run sees them), its run, and the ack the worker will make once it returns; the worker's own
    heartbeats, retries and acks are not seen (README.md)."""
    writer, job = _history[0], alkstore.current_job()
    held = {"job": job.id, "fence": job.fence, "worker": writer.process}
    writer.log(Kind.CLAIM, lease_until=job.lease_until.timestamp(), **held)
    writer.log(Kind.RUN_START, **held)
    try:
        if tag == "long":
            job.stop.wait(LEASE_S * 2)  # ends early once the lease is lost
        if tag == "overrun" and job.attempts == 1:
            job.stop.wait(CHORE_TIMEOUT_S * 3)  # the timeout cancels it
        if tag == "bury" or (tag == "fail" and job.attempts == 1):
            raise RuntimeError(f"{tag} on cue")
    finally:
        writer.log(Kind.RUN_END, **held)
    if not job.stop.is_cancelled():  # given up (timeout, lost lease): the worker will not ack it
        writer.log(Kind.ACK, **held)


@contextlib.contextmanager
def _opened(args: argparse.Namespace, stop: StopToken) -> Iterator[alkstore.Store | None]:
    """The run's store (a pool of two), opened however long an outage lasts; ``None`` if stopped first."""
    store = _patiently(stop, lambda: alkstore.open(args.url, schema=args.schema, min_size=0, max_size=2))
    try:
        yield store
    finally:
        if store is not None:
            store.close()


def _patiently(stop: StopToken, step: Callable[[], T]) -> T | None:
    """``step()``, again after each outage, until it returns; ``None`` if stopped first."""
    while not stop.is_cancelled():
        try:
            return step()
        except DatabaseUnavailable:
            stop.wait(BACKOFF_S)
    return None


def produce(args: argparse.Namespace, writer: HistoryWriter, stop: StopToken) -> None:
    """Enqueue tagged jobs (varied ``max_attempts``; one at a time, in batches, under a unique key, or as
    ``chore`` runs) and keyed outbox messages, half committed, half rolled back (unique jobs: committed)."""
    rng = random.Random(args.seed)
    tags, weights = list(TAGS), list(TAGS.values())
    chore_tags, chore_weights = list(CHORE_TAGS), list(CHORE_TAGS.values())
    sent = 0
    with _opened(args, stop) as store:
        while store is not None and not stop.is_cancelled():
            commit = rng.random() < 0.5
            try:
                draw = rng.random()
                if draw < 0.45:
                    tag = rng.choices(tags, weights)[0]
                    record.enqueue(writer, store, QUEUE, tag, commit=commit, max_attempts=rng.randint(1, 4))
                elif draw < 0.52:
                    batch = rng.choices(tags, weights, k=rng.randint(2, BATCH))
                    record.enqueue_batch(writer, store, QUEUE, batch, commit=commit, max_attempts=rng.randint(1, 4))
                elif draw < 0.6:
                    key = f"u{rng.randrange(UNIQUE_KEYS)}"
                    record.enqueue_unique(writer, store, QUEUE, key, max_attempts=UNIQUE_ATTEMPTS)
                elif draw < 0.72:
                    tag = rng.choices(chore_tags, chore_weights)[0]
                    record.enqueue_task(writer, store, chore, tag, commit=commit, max_attempts=rng.randint(1, 4))
                else:
                    sent += 1
                    message, key = f"{writer.process}-{sent}", f"{rng.choice(KEYS)}.{sent // KEY_SPAN}"
                    record.outbox(writer, store, OUTBOX, message, key, commit=commit, flaky=rng.random() < 0.1)
            except DatabaseUnavailable:
                stop.wait(BACKOFF_S)  # the outcome is unknown: nothing is logged, nothing is promised
            stop.wait(rng.uniform(0.0, 2.0 / args.rate))


def _beat(writer: HistoryWriter, job: Job) -> None:
    """Two leases of work, heartbeating through them; an outage's heartbeat is skipped, a lost lease ends it."""
    for _ in range(5):
        time.sleep(LEASE_S * 0.4)
        try:
            if not record.heartbeat(writer, job):
                return
        except DatabaseUnavailable:
            continue


def _body(writer: HistoryWriter, job: Job) -> Callable[[], None]:
    """What the job's tag asks of this attempt."""
    tag = job.payload["tag"]

    def body() -> None:
        if tag == "beat":
            _beat(writer, job)
        if tag == "slow":  # past the lease, then (the next holder) within it: the stale ack lands mid-run
            time.sleep(LEASE_S * (1.5 if job.attempts == 1 else 0.8))
        if tag == "bury" or (tag == "fail" and job.attempts == 1):
            raise RuntimeError(f"{tag} on cue")

    return body


def work(args: argparse.Namespace, writer: HistoryWriter, stop: StopToken) -> None:
    """A thin worker loop of claim, run, then ack or retry, every step recorded."""
    with _opened(args, stop) as store:
        while store is not None and not stop.is_cancelled():
            try:
                job = record.claim(writer, store, QUEUE)
                if job is None:
                    stop.wait(0.05)
                    continue
                try:
                    record.run(writer, job, _body(writer, job))
                except RuntimeError as exc:
                    record.retry(writer, job, str(exc))
                else:
                    record.ack(writer, job)
            except DatabaseUnavailable:
                stop.wait(BACKOFF_S)


async def _abeat(writer: HistoryWriter, job: AsyncJob) -> None:
    """``_beat`` on the async runtime."""
    for _ in range(5):
        await asyncio.sleep(LEASE_S * 0.4)
        try:
            if not await record.aheartbeat(writer, job):
                return
        except DatabaseUnavailable:
            continue


def _abody(writer: HistoryWriter, job: AsyncJob) -> Callable[[], Awaitable[None]]:
    """``_body`` on the async runtime."""
    tag = job.payload["tag"]

    async def body() -> None:
        if tag == "beat":
            await _abeat(writer, job)
        if tag == "slow":
            await asyncio.sleep(LEASE_S * (1.5 if job.attempts == 1 else 0.8))
        if tag == "bury" or (tag == "fail" and job.attempts == 1):
            raise RuntimeError(f"{tag} on cue")

    return body


async def _aopened(args: argparse.Namespace, stop: StopToken) -> alkstore.AsyncStore | None:
    """``_opened`` on the async runtime: the run's store, however long an outage lasts; ``None`` if stopped."""
    while not stop.is_cancelled():
        try:
            return await alkstore.open_async(args.url, schema=args.schema, min_size=0, max_size=2)
        except DatabaseUnavailable:
            await asyncio.sleep(BACKOFF_S)
    return None


async def awork(args: argparse.Namespace, writer: HistoryWriter, stop: StopToken) -> None:
    """``work`` on the async runtime: an ``AsyncStore`` and its jobs, the same steps and events."""
    store = await _aopened(args, stop)
    if store is None:
        return
    async with store:
        while not stop.is_cancelled():
            try:
                job = await record.aclaim(writer, store, QUEUE)
                if job is None:
                    await asyncio.sleep(0.05)
                    continue
                try:
                    await record.arun(writer, job, _abody(writer, job))
                except RuntimeError as exc:
                    await record.aretry(writer, job, str(exc))
                else:
                    await record.aack(writer, job)
            except DatabaseUnavailable:
                await asyncio.sleep(BACKOFF_S)


def work_tasks(args: argparse.Namespace, stop: StopToken) -> None:
    """alkstore's own ``Worker`` running ``chore`` (two at a time): it claims, heartbeats, times out,
    retries and acks by itself."""
    with _opened(args, stop) as store:
        if store is not None:
            worker = alkstore.Worker(store, TASKS, concurrency=2, grace=TASK_GRACE_S, worker_id=_history[0].process)
            worker.run(stop)


async def awork_tasks(args: argparse.Namespace, stop: StopToken) -> None:
    """``work_tasks`` on the async runtime: ``AsyncWorker`` (a plain task runs on a thread)."""
    store = await _aopened(args, stop)
    if store is not None:
        async with store:
            worker = alkstore.AsyncWorker(
                store, TASKS, concurrency=2, grace=TASK_GRACE_S, worker_id=_history[0].process
            )
            await worker.run(stop)


def _exhaust(store: alkstore.Store, stop: StopToken) -> None:
    """Hold every connection of the store's pool (two) in idle transactions for ``HOLD_S``."""
    try:
        with contextlib.ExitStack() as held:
            for _ in range(2):
                held.enter_context(store.transaction())
            print("pool exhausted", file=sys.stderr, flush=True)
            stop.wait(HOLD_S)
    except alkstore.AlkstoreError as exc:
        print(f"pool exhaustion ended early: {exc}", file=sys.stderr, flush=True)


def schedule(args: argparse.Namespace, writer: HistoryWriter, stop: StopToken, exhaust: threading.Event) -> None:
    """Register the schedule (logged once), then run the scheduler, leading or standing by; log each fire."""

    def on_fire(fire: Fire) -> None:
        writer.log(Kind.SCHEDULE_FIRE, schedule=fire.schedule, boundary=fire.boundary.timestamp())

    with _opened(args, stop) as store:
        if store is None:
            return
        opened = store
        stored = _patiently(stop, lambda: opened.schedule(SCHEDULE, f"@every {INTERVAL_S:g}s", PULSES))
        if stored is None:
            return
        writer.log(
            Kind.SCHEDULE_REGISTER, schedule=SCHEDULE, interval=INTERVAL_S, boundary=stored.next_boundary.timestamp()
        )

        def exhauster() -> None:
            while not stop.is_cancelled():
                if exhaust.wait(0.2):
                    exhaust.clear()
                    _exhaust(store, stop)

        thread = threading.Thread(target=exhauster, name="exhaust", daemon=True)
        thread.start()
        store.run_schedules(stop, on_fire, standby=True)
        thread.join()


def deliver(args: argparse.Namespace, writer: HistoryWriter, stop: StopToken) -> None:
    """An outbox courier whose delivery appends the message id to its sink file; a flaky message fails once."""
    (args.run / SINK).mkdir(exist_ok=True)
    sink = os.open(args.run / SINK / f"{writer.process}.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def delivery(payload: Any, job: Job) -> None:
        began = time.monotonic()
        if payload.get("flaky") and job.attempts == 1:
            raise RuntimeError("flaky on cue")
        os.write(sink, f"{payload['message']}\n".encode())
        writer.log(Kind.DELIVERY, began=began, message=payload["message"], key=job.ordering_key)

    try:
        with _opened(args, stop) as store:
            if store is not None:
                store.outbox(OUTBOX).run(writer.process, delivery, stop, poll_interval=0.2)
    finally:
        os.close(sink)


def sink_messages(run: Path) -> set[str]:
    """Every message id the couriers' sink holds (a torn last line, a kill's, is dropped)."""
    messages: set[str] = set()
    for path in sorted((run / SINK).glob("*.txt")):
        lines = path.read_text(encoding="utf-8").split("\n")
        messages.update(line for line in lines[:-1] if line)
    return messages


def main(argv: Sequence[str] | None = None) -> int:
    """Run one role until SIGTERM; 0 after a clean stop."""
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis.proc")
    parser.add_argument("role", choices=[*ROLES])
    parser.add_argument("--id", required=True, help="the process's name in the history (one file each)")
    parser.add_argument("--url", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--run", type=Path, required=True, help="the run directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=25.0, help="a producer's steps per second, about")
    parser.add_argument(
        "--wall-offset", type=float, help="log wall time as the monotonic clock plus this (the run's host clock)"
    )
    args = parser.parse_args(argv)
    signals = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # the threads started below inherit the mask
    stop, exhaust = StopToken(), threading.Event()
    failed: list[BaseException] = []
    writer = HistoryWriter(args.run / "history", args.id, wall_offset=args.wall_offset)
    _history.append(writer)

    def body() -> None:
        try:
            if args.role == "producer":
                produce(args, writer, stop)
            elif args.role == "worker":
                work(args, writer, stop)
            elif args.role == "async-worker":
                asyncio.run(awork(args, writer, stop))
            elif args.role == "task-worker":
                work_tasks(args, stop)
            elif args.role == "task-async-worker":
                asyncio.run(awork_tasks(args, stop))
            elif args.role == "scheduler":
                schedule(args, writer, stop, exhaust)
            else:
                deliver(args, writer, stop)
        except BaseException as exc:
            failed.append(exc)
            raise
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # wake the main thread

    thread = threading.Thread(target=body, name=args.role)
    thread.start()
    while not stop.is_cancelled():
        if signal.sigwait(signals) == signal.SIGUSR1:
            exhaust.set()
        else:
            stop.cancel()
    thread.join()
    writer.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
