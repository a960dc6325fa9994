"""Recorded steps for the harness's processes: each calls alkstore and logs the events the checker reads.

Every step logs after its call returned (``began`` is when it was issued); an ack also logs its
intent first, so a worker killed between acking and logging leaves a trace (README.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import alkstore
from alkstore import EnqueueOpts, Job, LeaseLost

from .history import HistoryWriter, Kind

__all__ = ["ack", "claim", "enqueue", "heartbeat", "outbox", "retry", "run"]


class _RollBack(Exception):
    """Raised inside a transaction to roll it back on purpose."""


def enqueue(
    writer: HistoryWriter, store: alkstore.Store, queue: str, tag: str, *, commit: bool = True, max_attempts: int = 3
) -> int:
    """Enqueue a job tagged ``tag`` in a transaction of the caller's that commits or rolls back; its id."""
    began = time.monotonic()
    job = -1
    try:
        with store.transaction() as tx:
            job = store.enqueue_tx(tx, queue, {"tag": tag}, EnqueueOpts(max_attempts=max_attempts))
            if not commit:
                raise _RollBack
    except _RollBack:
        writer.log(Kind.ENQUEUE_ROLLED_BACK, began=began, job=job, queue=queue, tag=tag, max_attempts=max_attempts)
        return job
    writer.log(Kind.ENQUEUE_COMMITTED, began=began, job=job, queue=queue, tag=tag, max_attempts=max_attempts)
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


def claim(writer: HistoryWriter, store: alkstore.Store, queue: str) -> Job | None:
    """Claim one job of ``queue`` as this process; log the claim with its fence and lease end."""
    began = time.monotonic()
    job = store.queue(queue).claim(writer.process)
    if job is not None:
        assert job.lease_until is not None
        writer.log(
            Kind.CLAIM,
            began=began,
            job=job.id,
            fence=job.fence,
            worker=writer.process,
            lease_until=job.lease_until.timestamp(),
        )
    return job


def run(writer: HistoryWriter, job: Job, body: Callable[[], object]) -> None:
    """Run ``body`` as the job's task, between a ``run_start`` and a ``run_end``."""
    fields: dict[str, Any] = {"job": job.id, "fence": job.fence, "worker": writer.process}
    writer.log(Kind.RUN_START, **fields)
    try:
        body()
    finally:
        writer.log(Kind.RUN_END, **fields)


def heartbeat(writer: HistoryWriter, job: Job) -> bool:
    """Extend the job's lease; log the new lease end when it took; whether it did (``False``: lost)."""
    began = time.monotonic()
    try:
        until = job.heartbeat()
    except LeaseLost:
        return False
    fields: dict[str, Any] = {"job": job.id, "fence": job.fence, "worker": writer.process}
    writer.log(Kind.HEARTBEAT, began=began, lease_until=until.timestamp(), **fields)
    return True


def ack(writer: HistoryWriter, job: Job) -> bool:
    """Ack the job: its intent, then the outcome (``ok`` false when refused as stale); whether it took."""
    fields: dict[str, Any] = {"job": job.id, "fence": job.fence, "worker": writer.process}
    began = writer.log(Kind.ACK, **fields).mono
    try:
        job.ack()
    except LeaseLost:
        writer.log(Kind.ACK, began=began, ok=False, **fields)
        return False
    writer.log(Kind.ACK, began=began, ok=True, **fields)
    return True


def retry(writer: HistoryWriter, job: Job, error: str) -> bool:
    """Retry the job (it buries itself on its last attempt); logged only when it took."""
    fields: dict[str, Any] = {"job": job.id, "fence": job.fence, "worker": writer.process}
    last = job.attempts >= job.max_attempts
    began = time.monotonic()
    try:
        job.retry(error)
    except LeaseLost:
        return False
    writer.log(Kind.BURY if last else Kind.RETRY, began=began, **fields)
    return True
