"""Recorded steps for the harness's processes: each calls alkstore and logs the events the checker reads.

Every step logs after its call returned (``began`` is when it was issued); an ack also logs its
intent first, so a worker killed between acking and logging leaves a trace (README.md). The
worker's steps come twice, for the sync runtime (``claim``, ``ack``, ...) and the async one
(``aclaim``, ``aack``, ...); what each logs is written once, in the ``_log_*`` helpers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import alkstore
from alkstore import AsyncJob, EnqueueOpts, Job, LeaseLost

from .history import HistoryWriter, Kind

__all__ = [
    "aack",
    "ack",
    "aclaim",
    "aheartbeat",
    "aretry",
    "arun",
    "claim",
    "enqueue",
    "enqueue_batch",
    "enqueue_task",
    "enqueue_unique",
    "heartbeat",
    "outbox",
    "retry",
    "run",
]


class _RollBack(Exception):
    """Raised inside a transaction to roll it back on purpose."""


def enqueue(
    writer: HistoryWriter, store: alkstore.Store, queue: str, tag: str, *, commit: bool = True, max_attempts: int = 3
) -> int:
    """Enqueue a job tagged ``tag`` in a transaction of the caller's that commits or rolls back; its id."""
    return enqueue_batch(writer, store, queue, [tag], commit=commit, max_attempts=max_attempts)[0]


def enqueue_batch(
    writer: HistoryWriter,
    store: alkstore.Store,
    queue: str,
    tags: Sequence[str],
    *,
    commit: bool = True,
    max_attempts: int = 3,
) -> list[int]:
    """Enqueue a job per tag in one transaction of the caller's (one statement for two or more) that
    commits or rolls back; an event per job; their ids."""
    began = time.monotonic()
    jobs: list[int] = []
    opts = EnqueueOpts(max_attempts=max_attempts)
    try:
        with store.transaction() as tx:
            if len(tags) == 1:
                jobs = [store.enqueue_tx(tx, queue, {"tag": tags[0]}, opts)]
            else:
                jobs = list(store.enqueue_many_tx(tx, queue, [{"tag": tag} for tag in tags], opts))
            if not commit:
                raise _RollBack
    except _RollBack:
        kind = Kind.ENQUEUE_ROLLED_BACK
    else:
        kind = Kind.ENQUEUE_COMMITTED
    for job, tag in zip(jobs, tags, strict=True):
        writer.log(kind, began=began, job=job, queue=queue, tag=tag, max_attempts=max_attempts)
    return jobs


def enqueue_task(
    writer: HistoryWriter,
    store: alkstore.Store,
    task: alkstore.Task[..., None],
    tag: str,
    *,
    commit: bool = True,
    max_attempts: int = 3,
) -> int:
    """Enqueue a run of ``task(tag)`` in a transaction of the caller's that commits or rolls back; its id."""
    began = time.monotonic()
    job = -1
    try:
        with store.transaction() as tx:
            job = task.with_options(EnqueueOpts(max_attempts=max_attempts)).enqueue_tx(store, tx, tag=tag)
            if not commit:
                raise _RollBack
    except _RollBack:
        kind = Kind.ENQUEUE_ROLLED_BACK
    else:
        kind = Kind.ENQUEUE_COMMITTED
    writer.log(kind, began=began, job=job, queue=task.queue, tag=tag, max_attempts=max_attempts)
    return job


def enqueue_unique(writer: HistoryWriter, store: alkstore.Store, queue: str, key: str, *, max_attempts: int) -> int:
    """Enqueue an ``ok`` job under the unique key ``key`` in a committed transaction of the caller's: a new
    job, or (while one of the key is unfinished) that job's id. Only commits are logged: a rolled-back
    call may have returned another's job, which runs."""
    began = time.monotonic()
    opts = EnqueueOpts(max_attempts=max_attempts, unique_key=key)
    with store.transaction() as tx:
        job = store.enqueue_tx(tx, queue, {"tag": "ok"}, opts)
    writer.log(Kind.ENQUEUE_COMMITTED, began=began, job=job, queue=queue, tag="ok", key=key, max_attempts=max_attempts)
    return job


def outbox(
    writer: HistoryWriter,
    store: alkstore.Store,
    name: str,
    message: str,
    key: str,
    *,
    commit: bool = True,
    **payload: Any,
) -> None:
    """Add ``message`` to the outbox ``name`` under the ordering key ``key``, in a transaction of the
    caller's that commits or rolls back; only a commit is logged (a rolled-back message promises nothing)."""
    began = time.monotonic()
    try:
        with store.transaction() as tx:
            store.outbox_enqueue_tx(tx, name, {"message": message, **payload}, EnqueueOpts(ordering_key=key))
            if not commit:
                raise _RollBack
    except _RollBack:
        return
    writer.log(Kind.OUTBOX_COMMIT, began=began, message=message, key=key, queue=name)


def _held(writer: HistoryWriter, job: Job | AsyncJob) -> dict[str, Any]:
    return {"job": job.id, "fence": job.fence, "worker": writer.process}


def _log_claim(writer: HistoryWriter, job: Job | AsyncJob | None, began: float) -> None:
    if job is not None:
        assert job.lease_until is not None
        writer.log(Kind.CLAIM, began=began, lease_until=job.lease_until.timestamp(), **_held(writer, job))


def _log_retry(writer: HistoryWriter, job: Job | AsyncJob, began: float) -> None:
    last = job.attempts >= job.max_attempts  # on its last attempt a retry buries the job
    writer.log(Kind.BURY if last else Kind.RETRY, began=began, **_held(writer, job))


def claim(writer: HistoryWriter, store: alkstore.Store, queue: str) -> Job | None:
    """Claim one job of ``queue`` as this process; log the claim with its fence and lease end."""
    began = time.monotonic()
    job = store.queue(queue).claim(writer.process)
    _log_claim(writer, job, began)
    return job


def run(writer: HistoryWriter, job: Job, body: Callable[[], object]) -> None:
    """Run ``body`` as the job's task, between a ``run_start`` and a ``run_end``."""
    writer.log(Kind.RUN_START, **_held(writer, job))
    try:
        body()
    finally:
        writer.log(Kind.RUN_END, **_held(writer, job))


def heartbeat(writer: HistoryWriter, job: Job) -> bool:
    """Extend the job's lease; log the new lease end when it took; whether it did (``False``: lost)."""
    began = time.monotonic()
    try:
        until = job.heartbeat()
    except LeaseLost:
        return False
    writer.log(Kind.HEARTBEAT, began=began, lease_until=until.timestamp(), **_held(writer, job))
    return True


def ack(writer: HistoryWriter, job: Job) -> bool:
    """Ack the job: its intent, then the outcome (``ok`` false when refused as stale); whether it took."""
    began = writer.log(Kind.ACK, **_held(writer, job)).mono
    try:
        job.ack()
    except LeaseLost:
        writer.log(Kind.ACK, began=began, ok=False, **_held(writer, job))
        return False
    writer.log(Kind.ACK, began=began, ok=True, **_held(writer, job))
    return True


def retry(writer: HistoryWriter, job: Job, error: str) -> bool:
    """Retry the job (it buries itself on its last attempt); logged only when it took."""
    began = time.monotonic()
    try:
        job.retry(error)
    except LeaseLost:
        return False
    _log_retry(writer, job, began)
    return True


async def aclaim(writer: HistoryWriter, store: alkstore.AsyncStore, queue: str) -> AsyncJob | None:
    """``claim`` on the async runtime."""
    began = time.monotonic()
    job = await store.queue(queue).claim(writer.process)
    _log_claim(writer, job, began)
    return job


async def arun(writer: HistoryWriter, job: AsyncJob, body: Callable[[], Awaitable[object]]) -> None:
    """``run`` on the async runtime."""
    writer.log(Kind.RUN_START, **_held(writer, job))
    try:
        await body()
    finally:
        writer.log(Kind.RUN_END, **_held(writer, job))


async def aheartbeat(writer: HistoryWriter, job: AsyncJob) -> bool:
    """``heartbeat`` on the async runtime."""
    began = time.monotonic()
    try:
        until = await job.heartbeat()
    except LeaseLost:
        return False
    writer.log(Kind.HEARTBEAT, began=began, lease_until=until.timestamp(), **_held(writer, job))
    return True


async def aack(writer: HistoryWriter, job: AsyncJob) -> bool:
    """``ack`` on the async runtime."""
    began = writer.log(Kind.ACK, **_held(writer, job)).mono
    try:
        await job.ack()
    except LeaseLost:
        writer.log(Kind.ACK, began=began, ok=False, **_held(writer, job))
        return False
    writer.log(Kind.ACK, began=began, ok=True, **_held(writer, job))
    return True


async def aretry(writer: HistoryWriter, job: AsyncJob, error: str) -> bool:
    """``retry`` on the async runtime."""
    began = time.monotonic()
    try:
        await job.retry(error)
    except LeaseLost:
        return False
    _log_retry(writer, job, began)
    return True
