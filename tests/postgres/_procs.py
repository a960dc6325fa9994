"""Bodies of the OS processes the Postgres tests spawn (importable, so ``spawn`` can find them)."""

from __future__ import annotations

from multiprocessing.synchronize import Barrier
from typing import Any

import alkstore


def migrate(dsn: str, schema: str, barrier: Barrier) -> None:
    """Open ``schema`` with ``migrate=True`` once every process is ready, then close."""
    barrier.wait()
    alkstore.open(dsn, schema=schema, migrate=True, min_size=0, max_size=1).close()


def drain(dsn: str, schema: str, queue: str, barrier: Barrier, results: Any) -> None:
    """Claim and ack jobs of ``queue`` until it is empty; report the claimed ids on ``results``."""
    claimed = []
    with alkstore.open(dsn, schema=schema, min_size=0, max_size=1) as store:
        handle = store.queue(queue)
        barrier.wait()
        while (job := handle.claim("drainer")) is not None:
            claimed.append(job.id)
            job.ack()
    results.put(claimed)
