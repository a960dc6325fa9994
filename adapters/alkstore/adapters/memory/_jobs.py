"""The memory engine's job transitions: enqueue (in its own transaction or a caller's), claim, the fenced
finishing calls, heartbeats, and reading a job (the runtime port's jobs, ADR 014).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from datetime import datetime
from operator import attrgetter
from typing import Any

from alkstore import engine as port
from alkstore.errors import InvalidTransaction

from ._dependencies import DependencyTables
from ._state import Fenced, MemoryTransaction, QueueIndex, result_row

__all__ = ["JobTables"]


class JobTables(DependencyTables):
    """Queue configs' readers and the job lifecycle: each method one atomic transition under the state's lock."""

    def caller_transaction(self, tx: Any) -> MemoryTransaction:
        if not isinstance(tx, MemoryTransaction) or tx._tables is not self:
            raise InvalidTransaction(f"expected a transaction from this store's transaction(), not {type(tx).__name__}")
        if tx._state != "open":
            raise InvalidTransaction(f"the transaction is already {tx._state}; nothing was enqueued")
        return tx

    def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        if tx is not None:
            return self._enqueue_tx(self.caller_transaction(tx), jobs, now)

        def publish(row: port.JobRecord) -> None:
            if row.unique_key is not None:
                self._holders[(row.queue, row.unique_key)] = row.id
            self._publish(row)

        with self._cond:
            self.check_parents(jobs)
            self._seen = max(self._seen, now)
            ids = self._admit(jobs, now, publish)
            for queue in {job.queue for job in jobs}:
                self._signal(queue)
            return ids

    def begin(self) -> MemoryTransaction:
        """A new transaction of these tables (``StoreClosed`` once closed)."""
        self.check_open()
        return MemoryTransaction(self)

    def commit(self, tx: MemoryTransaction) -> None:
        """Publish what ``tx`` enqueued, at once and all together."""
        with self._cond:
            tx._state = "committed"
            for row in tx._pending:
                if row.unique_key is not None:
                    self._reserved.pop((row.queue, row.unique_key), None)
                    self._holders[(row.queue, row.unique_key)] = row.id
                self._publish(row)  # in commit order: ordering keys' lines follow it
            for queue in {row.queue for row in tx._pending}:
                self._signal(queue)
            for event in tx._events.values():
                self._emit(event)  # type: ignore[attr-defined]

    def rollback(self, tx: MemoryTransaction) -> None:
        """Forget what ``tx`` enqueued (and the unique keys it reserved)."""
        with self._cond:
            tx._state = "rolled back"
            for row in tx._pending:
                if row.unique_key is not None and self._reserved.get((row.queue, row.unique_key)) == row.id:
                    del self._reserved[(row.queue, row.unique_key)]
            tx._pending.clear()
            tx._events.clear()

    def _enqueue_tx(self, tx: MemoryTransaction, jobs: Sequence[port.NewJob], now: datetime) -> list[int]:
        """Buffer ``jobs`` in ``tx``; a unique key is reserved for the transaction from now (where Postgres
        would have a later enqueue of the key wait for the transaction's end, memory answers at once)."""

        def buffer(row: port.JobRecord) -> None:
            if row.unique_key is not None:
                self._reserved[(row.queue, row.unique_key)] = row.id
            tx._pending.append(row)

        with self._cond:
            self.check_parents(jobs, (row.id for row in tx._pending))
            return self._admit(jobs, now, buffer)

    def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        now = request.now
        with self._cond:
            self._seen = max(self._seen, now)
            index = self._index(request.queue)
            self._sweep_leases(index, now)
            self._sweep_expired(index, now)
            while index.delayed and index.delayed[0][0] <= now:
                _, _, row = heapq.heappop(index.delayed)
                if self._live(row):
                    heapq.heappush(index.ready, (-row.priority, row.run_at, row.id, next(self._serials), row))
            claimed: list[port.JobRecord] = []
            limit = self._rated_limit(request)
            if request.concurrency is not None:
                config = self._configs.get(request.queue)
                if config is not None and config.concurrency is not None:  # the stored limit binds (ADR 033)
                    running = sum(1 for job_id in index.running if self._lease_live(job_id, now))
                    limit = min(limit, max(0, config.concurrency - running))
            limited: list[tuple[int, datetime, int, int, port.JobRecord]] = []
            while index.ready and len(claimed) < limit:
                entry = heapq.heappop(index.ready)
                _, run_at, job_id, _, row = entry
                if not self._live(row):
                    continue
                if run_at > now:  # the clock went backwards since it was ready
                    heapq.heappush(index.delayed, (run_at, next(self._serials), row))
                    continue
                if not self._may_start(request, row):  # left where it is: not taken, no attempt spent
                    limited.append(entry)
                    continue
                lease_until = now + (row.visibility if row.visibility is not None else request.lease)
                taken = _taken(row, request.worker_id, lease_until, now, len(self._children.get(job_id, ())))
                if row.unique_key is not None and not row.unique_running:
                    self._holders.pop((row.queue, row.unique_key), None)
                self._jobs[job_id] = taken
                index.running.add(job_id)
                heapq.heappush(index.leases, (lease_until, next(self._serials), taken))
                claimed.append(taken)
            for entry in limited:
                heapq.heappush(index.ready, entry)
            if claimed and request.rate is not None:
                self._next_starts[(request.queue, port.QUEUE_RATE_KEY)] = port.next_start(now, request.rate)
            return claimed

    def _rated_limit(self, request: port.ClaimRequest) -> int:
        """How many jobs the claim may take as far as the queue's own rate limit goes: one start at most."""
        if request.rate is None:
            return request.limit
        next_at = self._next_starts.get((request.queue, port.QUEUE_RATE_KEY))
        return min(request.limit, 1) if port.may_start(next_at, request.now) else 0

    def _may_start(self, request: port.ClaimRequest, row: port.JobRecord) -> bool:
        """Whether ``row`` may start under its key's rate limit; if so, the start is counted (ADR 070)."""
        if request.key_rate is None or row.rate_key is None:
            return True
        slot = (row.queue, row.rate_key)
        if not port.may_start(self._next_starts.get(slot), request.now):
            return False
        self._next_starts[slot] = port.next_start(request.now, request.key_rate)
        return True

    def _lease_live(self, job_id: int, now: datetime) -> bool:
        row = self._jobs.get(job_id)
        return (
            row is not None
            and row.state is port.JobState.RUNNING
            and row.lease_until is not None
            and (row.lease_until > now)
        )

    def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        with self._cond:
            return self.ack(acks), self.claim(request)

    def _sweep_leases(self, index: QueueIndex, now: datetime) -> None:
        while index.leases and index.leases[0][0] <= now:
            _, _, row = heapq.heappop(index.leases)
            if not self._live(row):
                continue
            if row.cancel_requested:
                self._delete(row)  # its worker is gone: it ends cancelled (ADR 035)
            elif row.attempts >= row.max_attempts:
                self._to_dead(row, port.LEASE_EXPIRED_ERROR, None, now)
            else:
                self._make_pending(row)

    def _sweep_expired(self, index: QueueIndex, now: datetime) -> None:
        while index.expiry and index.expiry[0][0] <= now:
            _, _, row = heapq.heappop(index.expiry)
            if self._live(row):
                self._to_dead(row, port.JOB_EXPIRED_ERROR, None, now)

    def _hand_back(self, job: port.JobRecord, **changes: Any) -> None:
        """A held job goes back to pending with ``changes`` and its queue is woken, unless it was asked to
        stop: then it ends cancelled (ADR 035)."""
        if job.cancel_requested:
            self._delete(job)
            return
        self._make_pending(job, **changes)
        self._signal(job.queue)

    def _each_held(self, items: Sequence[Fenced], change: Callable[[port.JobRecord, Fenced], None]) -> list[port.Held]:
        """Apply ``change`` to each job still held under its item's fence; return the stale pairs."""
        stale = []
        with self._cond:
            for item in items:
                job = self._held(item.job_id, item.fence)
                if job is None:
                    stale.append(port.Held(item.job_id, item.fence))
                else:
                    change(job, item)
        return stale

    def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        def ack(job: port.JobRecord, item: port.Held) -> None:
            if isinstance(item, port.Done) and not job.cancel_requested:
                self._results[job.id] = result_row(job, item, self._attempts.get(job.id, ()))
            if job.id in self._children and not job.cancel_requested:  # it succeeded: its dependents go on
                self._succeeded(job, item.result if isinstance(item, (port.Done, port.Handed)) else None)
            self._delete(job)

        return self._each_held(held, ack)

    def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        def retry(job: port.JobRecord, item: port.Retry) -> None:
            if item.attempt is not None:  # dropped with the job if it ends cancelled instead
                self._attempts[job.id] = (*self._attempts.get(job.id, ()), item.attempt)
            self._hand_back(job, run_at=item.run_at, last_error=item.error, last_traceback=item.traceback)

        return self._each_held(retries, retry)

    def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        def bury(job: port.JobRecord, item: port.Burial) -> None:
            self._to_dead(job, item.error, item.traceback, now, item.attempt)

        return self._each_held(burials, bury)

    def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        def release(job: port.JobRecord, _: port.Held) -> None:
            self._hand_back(job, attempts=max(0, job.attempts - 1))

        return self._each_held(held, release)

    def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        asked: list[port.Held] = []

        def beat(job: port.JobRecord, item: port.Heartbeat) -> None:
            row = self._jobs[job.id] = replace(job, lease_until=item.lease_until)
            heapq.heappush(self._index(row.queue).leases, (item.lease_until, next(self._serials), row))
            if row.cancel_requested:
                asked.append(port.Held(item.job_id, item.fence))

        return self._each_held(beats, beat), asked

    def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        with self._cond:
            return [
                port.Held(pair.job_id, pair.fence)
                for pair in held
                if (job := self._held(pair.job_id, pair.fence)) is not None and job.cancel_requested
            ]

    def get_job(self, job_id: int) -> port.JobRecord | None:
        with self._cond:
            live = self._jobs.get(job_id)
            if live is None:
                dead = self._dead.get(job_id)
                return None if dead is None else self._with_links(dead)
            logged = self._attempts.get(job_id)
            return self._with_links(live if logged is None else replace(live, attempt_log=logged))


#: A ``JobRecord``'s field values in field order, read in one call, and where each field is among them.
_VALUES = attrgetter(*(field.name for field in fields(port.JobRecord)))
_AT = {field.name: at for at, field in enumerate(fields(port.JobRecord))}
_STATE, _ATTEMPTS, _FENCE, _WORKER, _LEASE, _CLAIMED, _KEY, _DEPENDENTS = (
    _AT[name]
    for name in ("state", "attempts", "fence", "worker_id", "lease_until", "claimed_at", "unique_key", "dependents")
)


def _taken(
    row: port.JobRecord, worker_id: str, lease_until: datetime, now: datetime, dependents: int
) -> port.JobRecord:
    """``row`` as a claim at ``now`` takes it: ``dataclasses.replace``'s record, made by position (by keyword,
    field by field, it costs about twice as much, on every claimed job)."""
    values = list(_VALUES(row))
    values[_STATE] = port.JobState.RUNNING
    values[_ATTEMPTS] = row.attempts + 1
    values[_FENCE] = row.fence + 1
    values[_WORKER] = worker_id
    values[_LEASE] = lease_until
    values[_CLAIMED] = now
    values[_KEY] = row.unique_key if row.unique_running else None  # held while it runs, by option
    values[_DEPENDENTS] = dependents
    return port.JobRecord(*values)
