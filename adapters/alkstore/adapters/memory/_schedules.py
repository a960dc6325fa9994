"""The memory engine's locks and schedules: leases with fencing tokens, and the scheduler's ticks (the
runtime port's locks and schedules, ADR 009, 017).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from alkstore import engine as port
from alkstore.engine import (
    plan_tick,
    registration_boundary,
    soonest,
)
from alkstore.errors import LeaseLost

from ._state import TableState, new_row

__all__ = ["ScheduleTables"]


class ScheduleTables(TableState):
    """Locks and schedules: each method one atomic transition under the state's lock."""

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        with self._cond:
            held = self._locks.get(name)
            if held is not None and held.expires_at > now:
                if held.owner != owner:
                    return None
                lock = replace(held, expires_at=expires_at)
            else:
                lock = port.LockRecord(name, owner, next(self._tokens), expires_at)
            self._locks[name] = lock
            return lock

    def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token or held.expires_at <= now:
                raise LeaseLost(f"lock {lock.name!r} is no longer held by {lock.owner!r}")
            renewed = replace(held, expires_at=expires_at)
            self._locks[lock.name] = renewed
            return renewed

    def release_lock(self, lock: port.LockRecord) -> bool:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token:
                return False
            del self._locks[lock.name]
            return True

    def register_schedules(self, schedules: Sequence[port.NewSchedule], now: datetime) -> list[port.ScheduleRecord]:
        with self._cond:
            stored = []
            for new in schedules:
                old = self._schedules.get(new.name)
                existing = None if old is None else (old.interval_s, old.next_boundary, old.anchor)
                stored.append(
                    port.ScheduleRecord(
                        name=new.name,
                        spec=new.spec,
                        interval_s=new.interval_s,
                        queue=new.queue,
                        payload=new.payload,
                        priority=new.priority,
                        max_attempts=new.max_attempts,
                        expires=new.expires,
                        task=new.task,
                        anchor=new.anchor,
                        next_boundary=registration_boundary(existing, new.interval_s, now, new.anchor),
                        last_boundary=None if old is None else old.last_boundary,
                    )
                )
            for record in stored:
                self._schedules[record.name] = record
            return stored

    def unschedule(self, name: str) -> bool:
        with self._cond:
            return self._schedules.pop(name, None) is not None

    def schedules(self) -> list[port.ScheduleRecord]:
        with self._cond:
            return [self._schedules[name] for name in sorted(self._schedules)]

    def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        with self._cond:
            due = [
                port.DueSchedule(
                    record.name,
                    record.interval_s,
                    record.queue,
                    record.priority,
                    record.max_attempts,
                    record.expires,
                    record.next_boundary,
                    len(record.payload),
                )
                for record in self._schedules.values()
                if record.next_boundary <= now
            ]
            configs = {schedule.queue: self._configs.get(schedule.queue) for schedule in due}
            plan = plan_tick(due, configs, now, budget, fired)
            ids = [next(self._ids) for _ in plan.fires]
            for job_id, fire in zip(ids, plan.fires, strict=True):
                source = self._schedules[fire.schedule]
                job = port.NewJob(
                    fire.queue,
                    source.payload,
                    fire.priority,
                    fire.run_at,
                    fire.expires_at,
                    fire.max_attempts,
                    task=source.task,
                )
                self._make_pending(replace(new_row(job_id, job, now), schedule=fire.schedule, boundary=fire.boundary))
            for name, boundary, last in plan.advanced:
                record = self._schedules[name]
                self._schedules[name] = replace(
                    record, next_boundary=boundary, last_boundary=record.last_boundary if last is None else last
                )
            for queue in {fire.queue for fire in plan.fires}:
                self._signal(queue)
            return plan.result(ids, self._soonest())

    def _rated_due(self, row: port.JobRecord) -> datetime:
        """When a pending ``row`` may start: its ``run_at``, or later under its queue's stored rate limits."""
        config = self._configs.get(row.queue)
        if config is None or (config.rate is None and config.key_rate is None):
            return row.run_at
        gates = [self._next_starts.get((row.queue, port.QUEUE_RATE_KEY)) if config.rate is not None else None]
        if config.key_rate is not None and row.rate_key is not None:
            gates.append(self._next_starts.get((row.queue, row.rate_key)))
        return port.rated_due(row.run_at, *gates)

    def _soonest(self) -> datetime | None:
        return soonest(record.next_boundary for record in self._schedules.values())

    def soonest_boundary(self) -> datetime | None:
        with self._cond:
            return self._soonest()

    def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        """The soonest ``run_at`` or ``lease_until`` that may make a claim of ``queues`` find work (paused
        queues left out): a scan under the lock, as the inspection reads are."""
        with self._cond:
            wanted = {queue for queue in queues if not (config := self._configs.get(queue)) or not config.paused}
            dues: list[datetime] = []
            for row in self._jobs.values():
                if row.queue not in wanted or row.waiting:  # a waiting job moves when the one ahead ends
                    continue
                if row.state is port.JobState.PENDING:
                    dues.append(self._rated_due(row))
                elif row.state is port.JobState.RUNNING and row.lease_until is not None:
                    dues.append(row.lease_until)
            return min(dues, default=None)
