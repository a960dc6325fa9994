"""The scheduler leader loop, written once over the ``Engine`` and ``Clock`` ports (ADR 006).

Leadership is the engine's own lease ``__alkstore_scheduler`` under an owner token unique
to this runner instance. The lease (10 s) is renewed at the top of every iteration, which
alone decides loss, and every 2 s across the sleep, which is cut in 1 s slices so a stop
or a newly registered schedule is noticed within a slice. Correctness never rests on the
sleep: every tick locks what it fires.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from ._names import SCHEDULER_LOCK
from ._time import Clock, StopToken
from .engine import Engine, Fire, LockRecord
from .errors import AlkstoreError, LeadershipLost, LeaseLost

__all__ = ["LEASE_TTL", "RENEW_EVERY", "SLEEP_SLICE", "owner_token", "run_schedules"]

log = logging.getLogger("alkstore.scheduler")

LEASE_TTL = timedelta(seconds=10)
RENEW_EVERY = timedelta(seconds=2)
SLEEP_SLICE = timedelta(seconds=1)


def owner_token() -> str:
    """An owner token unique to one runner instance: host, pid, nanoseconds and randomness."""
    return f"{socket.gethostname()[:48]}:{os.getpid()}:{time.time_ns()}:{secrets.token_hex(4)}"


def run_schedules(
    engine: Engine,
    clock: Clock,
    stop: StopToken,
    on_fire: Callable[[Fire], None] | None = None,
) -> None:
    """Lead the scheduler until ``stop`` is cancelled, then release the lease and return.

    Raises ``LeadershipLost`` at once if another runner holds the lease (no tick happens),
    and before any further tick if the lease could not be renewed. ``on_fire`` runs on this
    thread between renewals: keep it short (well under the 10 s lease).
    """
    owner = owner_token()
    now = clock.now()
    lock = engine.try_lock(SCHEDULER_LOCK, owner, now, now + LEASE_TTL)
    if lock is None:
        raise LeadershipLost("another runner holds the scheduler lease")
    log.info("scheduler leadership acquired by %s", owner)
    held = True
    try:
        while not stop.is_cancelled():
            now = clock.now()
            try:
                lock = engine.renew_lock(lock, now, now + LEASE_TTL)
            except LeaseLost as exc:
                held = False
                raise LeadershipLost(f"scheduler lease of {owner} was lost") from exc
            ticked_at = clock.now()
            result = engine.tick(ticked_at)
            for name, count in result.skipped:
                log.warning("schedule %r was %d boundaries behind; skipped the oldest beyond the cap", name, count)
            for fire in result.fires:
                log.info("fired %r boundary %s as job %s on %r", fire.schedule, fire.boundary, fire.job_id, fire.queue)
                if on_fire is not None:
                    on_fire(fire)
            deadline = result.soonest
            if deadline is not None and deadline <= ticked_at:
                # A tick leaves every boundary after its instant; one that did not is a storage
                # fault. Wait a slice rather than spin on the database.
                log.warning("the soonest boundary %s is not after the tick at %s", deadline, ticked_at)
                deadline = ticked_at + SLEEP_SLICE
            lock = _sleep_until(engine, clock, stop, lock, deadline)
    finally:
        if held:
            try:
                engine.release_lock(lock)
            except AlkstoreError as exc:
                log.warning("could not release the scheduler lease: %s", exc)
            else:
                log.info("scheduler leadership released by %s", owner)


def _sleep_until(
    engine: Engine, clock: Clock, stop: StopToken, lock: LockRecord, deadline: datetime | None
) -> LockRecord:
    """Sleep in slices until ``deadline`` (re-read each slice), renewing the lease on the way.

    A failed renewal here ends the sleep early and is left to the loop top to judge.
    """
    last_renewal = clock.now()
    while not stop.is_cancelled():
        now = clock.now()
        if deadline is not None and now >= deadline:
            break
        step = SLEEP_SLICE if deadline is None else min(SLEEP_SLICE, deadline - now)
        clock.sleep(step.total_seconds(), stop)
        if stop.is_cancelled():
            break
        now = clock.now()
        if now - last_renewal >= RENEW_EVERY:
            try:
                lock = engine.renew_lock(lock, now, now + LEASE_TTL)
            except AlkstoreError as exc:
                log.warning("scheduler lease renewal failed mid-sleep: %s", exc)
                break
            last_renewal = now
        soonest = engine.soonest_boundary()
        if soonest is not None and (deadline is None or soonest < deadline):
            deadline = soonest
    return lock
