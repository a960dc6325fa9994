# GENERATED FILE, DO NOT EDIT: made from core/alkstore/scheduler/_runner_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The scheduler's loops, written once over the engine port and the ``Clock`` (ADR 006, 018, 026).

Leadership is the engine's own lock ``__alkstore_scheduler`` under an owner token unique to
this runner instance. The lease (10 s) is renewed at the top of every iteration, which alone
decides loss, between the transactions of a large tick, and every 2 s across the sleep, which
is cut in 1 s slices so a stop is noticed within a slice; each renewal across the sleep also
reads the soonest boundary, so a newly registered schedule is noticed within one (ADR 044).
Correctness never rests on the sleep: every tick locks what it fires.

Through an outage (``DatabaseUnavailable``) the leader keeps trying while its lease could
still be valid, and raises ``LeadershipLost`` once it cannot be; ``serve_schedules`` — the
standby loop every long-running process uses — then stands by and asks again. The timing and
the standby rule are ``_leader``'s.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime

from alkstore.errors import AlkstoreError, DatabaseUnavailable, LeadershipLost, LeaseLost
from alkstore.port._acompat import call
from alkstore.port._engine import operations_of
from alkstore.port._records import Fire, LockRecord, TickBudget, TickResult
from alkstore.port._runtime_port import RuntimePort
from alkstore.port._time import Clock, StopToken
from alkstore.rules._boundary import CATCH_UP_CAP
from alkstore.rules._names import SCHEDULER_LOCK

from ._leader import LEASE_TTL, LOOK_EVERY, RENEW_EVERY, RETRY_EVERY, SLEEP_SLICE, after_leading, owner_token
from ._tick import DEFAULT_BUDGET

__all__ = ["run_schedules", "serve_schedules", "tick_all"]

log = logging.getLogger("alkstore.scheduler")

#: What a runner calls for each fire: a plain function, or (in the async runtime) one returning an awaitable.
OnFire = Callable[[Fire], object]


def tick_all(
    engine: RuntimePort,
    now: datetime,
    budget: TickBudget = DEFAULT_BUDGET,
    each: Callable[[TickResult], None] | None = None,
    clock: Clock | None = None,
) -> TickResult:
    """One tick from ``now``, in as many bounded transactions as it takes (ADR 017).

    Each transaction counts the fires the earlier ones made, so the catch-up cap holds for the
    whole tick. With ``clock``, each later transaction plans at the clock's time as it begins
    (never before the last), so a schedule that falls due during a long tick fires in the next
    transaction instead of after the whole tick; without, every transaction plans at ``now``.
    ``each`` runs after every transaction with what it did (the leader reports fires there and,
    while ``more`` is left, renews its lease; raising stops the tick). The result holds every
    fire in the order stored, every skip, and the soonest boundary after the last transaction.
    """
    fired: Counter[str] = Counter()
    fires: list[Fire] = []
    skipped: list[tuple[str, int]] = []
    while True:
        result = engine.tick(now, budget, dict(fired))
        fires.extend(result.fires)
        skipped.extend(result.skipped)
        fired.update(fire.schedule for fire in result.fires)
        if each is not None:
            each(result)
        if not result.more:
            return TickResult(tuple(fires), tuple(skipped), result.soonest)
        if clock is not None:
            now = max(now, clock.now())


class _Leadership:
    """The leader's lease: renewed on a cadence, lost for good once a renewal is refused or too late."""

    def __init__(self, engine: RuntimePort, clock: Clock, stop: StopToken, lock: LockRecord) -> None:
        self.engine = engine
        self.clock = clock
        self.stop = stop
        self.lock = lock
        self.held = True
        self.renewed_at = clock.now()

    def renew(self) -> None:
        """Renew now; through an outage retry while the lease may still be valid, then give it up.

        Raises ``LeadershipLost`` when the lease was taken over or could not be renewed in time.
        """
        while True:
            now = self.clock.now()
            try:
                self.lock = self.engine.renew_lock(self.lock, now, now + LEASE_TTL)
            except LeaseLost as exc:
                self.held = False
                raise LeadershipLost(f"scheduler lease of {self.lock.owner} was lost") from exc
            except DatabaseUnavailable as exc:
                if now + RETRY_EVERY >= self.lock.expires_at:
                    self.held = False
                    raise LeadershipLost(
                        f"scheduler lease of {self.lock.owner} could not be renewed before it lapsed: {exc}"
                    ) from exc
                log.warning("could not renew the scheduler lease (%s); retrying while it holds", exc)
                self.clock.sleep(RETRY_EVERY.total_seconds(), self.stop)
                if self.stop.is_cancelled():
                    return
                continue
            self.renewed_at = now
            return

    def renew_if_due(self) -> None:
        if self.clock.now() - self.renewed_at >= RENEW_EVERY:
            self.renew()

    def release(self) -> None:
        if not self.held:
            return
        try:
            self.engine.release_lock(self.lock)
        except AlkstoreError as exc:
            log.warning("could not release the scheduler lease: %s", exc)
        else:
            log.info("scheduler leadership released by %s", self.lock.owner)


def run_schedules(engine: RuntimePort, clock: Clock, stop: StopToken, on_fire: OnFire | None = None) -> None:
    """Lead the scheduler until ``stop`` is cancelled, then release the lease and return.

    Raises ``LeadershipLost`` at once if another runner holds the lease (no tick happens),
    and before any further tick once the lease could not be renewed (refused, or an outage
    outlasted it). A transient failure of a tick is retried under a renewed lease. ``on_fire``
    runs in the loop between renewals: keep it short (well under the 10 s lease).
    """
    owner = owner_token()
    now = clock.now()
    lock = engine.try_lock(SCHEDULER_LOCK, owner, now, now + LEASE_TTL)
    if lock is None:
        raise LeadershipLost("another runner holds the scheduler lease")
    log.info("scheduler leadership acquired by %s", owner)
    leadership = _Leadership(engine, clock, stop, lock)

    def each(result: TickResult) -> None:
        for name, count in result.skipped:
            log.warning(
                "schedule %r was more than %d boundaries behind: fired the oldest %d, skipped the %d newer ones"
                " (its phase kept)",
                name,
                CATCH_UP_CAP,
                CATCH_UP_CAP,
                count,
            )
        for fire in result.fires:
            log.info("fired %r boundary %s as job %s on %r", fire.schedule, fire.boundary, fire.job_id, fire.queue)
            if on_fire is not None:
                call(on_fire, fire)
        if result.more:  # a long tick: keep the lease, and stop between its transactions if asked
            leadership.renew_if_due()
            if stop.is_cancelled():
                raise _Stopped

    try:
        while not stop.is_cancelled():
            leadership.renew()
            if stop.is_cancelled():
                break
            ticked_at = clock.now()
            try:
                result = tick_all(engine, ticked_at, DEFAULT_BUDGET, each, clock)
            except _Stopped:
                break
            except DatabaseUnavailable as exc:
                log.warning("scheduler tick failed (%s); retrying under a renewed lease", exc)
                clock.sleep(RETRY_EVERY.total_seconds(), stop)
                continue
            deadline = result.soonest
            if deadline is not None and deadline <= ticked_at:
                # A tick leaves every boundary after its instant; one that did not is a storage
                # fault. Wait a slice rather than spin on the database.
                log.warning("the soonest boundary %s is not after the tick at %s", deadline, ticked_at)
                deadline = ticked_at + SLEEP_SLICE
            _sleep_until(leadership, deadline)
    finally:
        leadership.release()


class _Stopped(Exception):
    """Raised between the transactions of a tick when the runner was asked to stop."""


def _sleep_until(leadership: _Leadership, deadline: datetime | None) -> None:
    """Sleep in slices until ``deadline``, renewing the lease on the way; each renewal also re-reads the
    soonest boundary (one statement, ADR 044), so a sooner one registered meanwhile moves the deadline.

    A failed renewal here ends the sleep early and is left to the loop top to judge.
    """
    clock, stop, engine = leadership.clock, leadership.stop, leadership.engine
    while not stop.is_cancelled():
        now = clock.now()
        if deadline is not None and now >= deadline:
            break
        step = SLEEP_SLICE if deadline is None else min(SLEEP_SLICE, deadline - now)
        clock.sleep(step.total_seconds(), stop)
        if stop.is_cancelled():
            break
        now = clock.now()
        if now - leadership.renewed_at < RENEW_EVERY:
            continue
        try:
            leadership.lock, soonest = engine.renew_lock_peek(leadership.lock, now, now + LEASE_TTL)
            leadership.renewed_at = now
        except AlkstoreError as exc:
            log.warning("scheduler lease renewal failed mid-sleep: %s", exc)
            break
        if soonest is not None and (deadline is None or soonest < deadline):
            deadline = soonest


def serve_schedules(
    engine: RuntimePort,
    clock: Clock,
    stop: StopToken,
    on_fire: OnFire | None = None,
    logger: logging.Logger = log,
) -> None:
    """Lead the scheduler when possible and stand by otherwise, until ``stop`` is cancelled.

    Every process that runs the scheduler (``alkstore run-schedules``, a worker with schedules)
    uses this loop: one leads, the others stand by and take over once the leader's lease lapses
    (at its end, read every ``LOOK_EVERY``) or it is released (within ``LOOK_EVERY``). Permanent
    errors (``SchemaOutOfDate``, ``StoreClosed``, a ``DatabaseError`` that is not transient) are
    raised. Standing by is logged once (again
    after each loss) on ``logger``: the caller's, so the line names who stands by.
    """
    standing_by = False
    while not stop.is_cancelled():
        try:
            run_schedules(engine, clock, stop, on_fire)
        except (LeadershipLost, DatabaseUnavailable) as exc:
            action = after_leading(exc)
        else:
            action = after_leading(None)
        if action is None:
            return
        if action.warn:
            logger.warning("%s; standing by, asking again once the lease is free", action.reason)
            standing_by = True
        elif not standing_by:
            logger.info("%s; standing by, asking again once the lease is free", action.reason)
            standing_by = True
        _stand_by(engine, clock, stop, action.wait.total_seconds())


def _stand_by(engine: RuntimePort, clock: Clock, stop: StopToken, wait: float) -> None:
    """Wait to ask for leadership again: ``wait`` wall seconds at least, then until the lease read once
    has lapsed on ``clock``, reading it again every ``LOOK_EVERY`` (a cadence in wall time, whatever the
    store's clock does). A lease that cannot be read, or is free, means asking after ``wait`` (ADR 044)."""
    looked = time.monotonic()
    operations = operations_of(engine)  # without it, the lease is not read: ask after ``wait`` (ADR 062)
    try:
        lock = None if operations is None else operations.read_lock(SCHEDULER_LOCK)
    except AlkstoreError:
        lock = None
    while not stop.wait(wait):
        if lock is None or clock.now() >= lock.expires_at:
            return
        if time.monotonic() - looked >= LOOK_EVERY.total_seconds():
            looked = time.monotonic()
            try:
                lock = None if operations is None else operations.read_lock(SCHEDULER_LOCK)
            except AlkstoreError:
                return
