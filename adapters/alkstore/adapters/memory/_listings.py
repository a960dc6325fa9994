"""The memory engine's operations port: counts and listings, actions on jobs, kept results, the
workers' reports and throughput, and (nothing to do in memory) storage upkeep (ADR 020, 042, 048).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import astuple, replace
from datetime import datetime
from typing import Any

from alkstore import engine as port
from alkstore.display import hour_of
from alkstore.engine import (
    after_key,
    listing_order,
    payload_contains,
    phase_at,
)

from ._state import TableState

__all__ = ["OperationTables"]


class OperationTables(TableState):
    """What operators read and do: each method one atomic read or transition under the state's lock."""

    def queue_counts(self, now: datetime, queue: str | None = None, cap: int | None = None) -> list[port.QueueCounts]:
        with self._cond:
            # ready, delayed, running, dead, oldest ready, waiting
            tallies: dict[str, list[Any]] = {} if queue is None else {queue: [0, 0, 0, 0, None, 0]}
            for row in itertools.chain(self._jobs.values(), self._dead.values()):
                if queue is not None and row.queue != queue:
                    continue
                tally = tallies.setdefault(row.queue, [0, 0, 0, 0, None, 0])
                if row.state is port.JobState.DEAD:
                    tally[3] += 1
                elif row.state is port.JobState.RUNNING:
                    tally[2] += 1
                elif row.waiting:
                    tally[5] += 1
                elif row.run_at > now:
                    tally[1] += 1
                else:
                    tally[0] += 1
                    tally[4] = row.run_at if tally[4] is None else min(tally[4], row.run_at)
            paused = {name for name, config in self._configs.items() if config.paused}
            if queue is None:
                for name in paused:
                    tallies.setdefault(name, [0, 0, 0, 0, None, 0])
        if cap is not None:
            for tally in tallies.values():
                tally[:4] = [min(count, cap) for count in tally[:4]]
                tally[5] = min(tally[5], cap)
        counts = []
        for name in sorted(tallies):
            ready, delayed, running, dead, oldest, waiting = tallies[name]
            counts.append(port.QueueCounts(name, ready, delayed, running, dead, oldest, waiting, name in paused))
        return counts

    def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        phase, now, after = query.phase, query.now, query.after
        with self._cond:
            source = self._dead.values() if phase is port.JobPhase.DEAD else self._jobs.values()
            rows = [row for row in source if row.queue == query.queue and phase_at(row, now) is phase]
        if query.contains is not None:
            rows = [row for row in rows if payload_contains(row.payload, query.contains)]
        if query.task is not None:
            rows = [row for row in rows if row.task == query.task]
        rows.sort(key=listing_order(phase, query.reverse))
        if after is not None:
            rows = [row for row in rows if after_key(row, after, phase, query.reverse)]
        return rows[: query.limit]

    def read_lock(self, name: str) -> port.LockRecord | None:
        with self._cond:
            return self._locks.get(name)

    def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        with self._cond:
            held = [lock for lock in self._locks.values() if lock.expires_at > now]
        held = sorted((lock for lock in held if after is None or lock.name > after), key=lambda lock: lock.name)
        return held[:limit]

    def record_action(self, action: port.NewAction) -> int:
        with self._cond:
            self._action_ids += 1
            entry = port.ActionRecord(self._action_ids, *astuple(action))
            self._actions.append(entry)
            return entry.id

    def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        with self._cond:
            older = [entry for entry in self._actions if before is None or entry.id < before]
            return older[-limit:][::-1]

    def purge_actions(self, before: datetime, limit: int) -> int:
        with self._cond:
            doomed = {entry.id for entry in self._actions if entry.at < before}
            doomed = set(sorted(doomed)[:limit])
            self._actions = [entry for entry in self._actions if entry.id not in doomed]
        return len(doomed)

    def cancel(self, job_ids: Sequence[int]) -> list[int]:
        cancelled = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                row = self._jobs.get(job_id)
                if row is not None and row.state is port.JobState.PENDING:
                    self._delete(row)  # its heap entries are dead now: _live() no longer matches
                    cancelled.append(job_id)
        return cancelled

    def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        marked = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                row = self._jobs.get(job_id)
                if row is not None and row.state is port.JobState.RUNNING:
                    marked_row = self._jobs[job_id] = replace(row, cancel_requested=True)
                    if marked_row.lease_until is not None:  # the old heap entry is dead: _live() no longer matches
                        entry = (marked_row.lease_until, next(self._serials), marked_row)
                        heapq.heappush(self._index(row.queue).leases, entry)
                    marked.append(job_id)
        return marked

    def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        with self._cond:
            doomed = sorted(
                (row.died_at, row.id)
                for row in self._dead.values()
                if row.queue == queue and row.died_at is not None and row.died_at <= died_before
            )[:limit]
            for _, job_id in doomed:
                del self._dead[job_id]
                self._unlink(job_id)
        return len(doomed)

    def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        requeued = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                job = self._dead.pop(job_id, None)
                if job is None:
                    continue
                self._publish(
                    replace(
                        job,
                        state=port.JobState.PENDING,
                        attempts=0,
                        run_at=now,
                        expires_at=None,
                        died_at=None,
                        unique_key=None,
                        attempt_log=(),
                    )
                )
                self._signal(job.queue)
                requeued.append(job_id)
        return requeued

    def get_result(self, job_id: int) -> port.ResultRecord | None:
        with self._cond:
            return self._results.get(job_id)

    def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        with self._cond:
            rows = [row for row in self._results.values() if row.queue == queue]
        rows.sort(key=lambda row: (row.finished_at, row.id), reverse=True)
        if after is not None and after.at is not None:
            rows = [row for row in rows if (row.finished_at, row.id) < (after.at, after.id)]
        return rows[:limit]

    def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        with self._cond:
            doomed = sorted(
                (row.keep_until, row.id)
                for row in self._results.values()
                if (queue is None or row.queue == queue) and row.keep_until <= now
            )[:limit]
            for _, job_id in doomed:
                del self._results[job_id]
        return len(doomed)

    def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        with self._cond:
            purged = [job_id for job_id in sorted(set(job_ids)) if self._dead.pop(job_id, None) is not None]
            for job_id in purged:
                self._unlink(job_id)
            return purged

    def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        with self._cond:
            self._workers[worker.id] = worker
            for count in throughput:
                done, failed = self._throughput.get((count.minute, count.queue), (0, 0))
                self._throughput[(count.minute, count.queue)] = (done + count.done, failed + count.failed)
            for figure in figures:
                key = (figure.minute, figure.queue, figure.task)
                had = self._task_figures.get(key, (0, 0, 0.0, 0.0))
                sums = (figure.done, figure.failed, figure.run_ms, figure.latency_ms)
                self._task_figures[key] = tuple(a + b for a, b in zip(had, sums, strict=True))  # type: ignore[assignment]

    def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        with self._cond:
            rows = sorted(
                (key, sums)
                for key, sums in self._task_figures.items()
                if key[0] >= since and (queue is None or key[1] == queue)
            )
        return [port.TaskFiguresRecord(q, task, minute, *sums) for (minute, q, task), sums in rows]

    def roll_up_task_figures(self, before: datetime) -> int:
        with self._cond:
            folded = [key for key in self._task_figures if key[0] < before and key[0] != hour_of(key[0])]
            for key in folded:
                sums = self._task_figures.pop(key)
                hour = (hour_of(key[0]), key[1], key[2])
                had = self._task_figures.get(hour, (0, 0, 0.0, 0.0))
                self._task_figures[hour] = tuple(a + b for a, b in zip(had, sums, strict=True))  # type: ignore[assignment]
        return len(folded)

    def purge_task_figures(self, before: datetime) -> int:
        with self._cond:
            doomed = [key for key in self._task_figures if key[0] < before]
            for key in doomed:
                del self._task_figures[key]
        return len(doomed)

    def remove_worker(self, worker_id: str) -> bool:
        with self._cond:
            return self._workers.pop(worker_id, None) is not None

    def workers(self, since: datetime) -> list[port.WorkerRecord]:
        with self._cond:
            return [self._workers[key] for key in sorted(self._workers) if self._workers[key].seen_at >= since]

    def forget_workers(self, seen_before: datetime) -> int:
        with self._cond:
            stale = [key for key, worker in self._workers.items() if worker.seen_at < seen_before]
            for key in stale:
                del self._workers[key]
        return len(stale)

    def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        with self._cond:
            rows = sorted((key, counts) for key, counts in self._throughput.items() if key[0] >= since)
        return [port.ThroughputRecord(queue, minute, done, failed) for (minute, queue), (done, failed) in rows]

    def purge_throughput(self, before: datetime) -> int:
        with self._cond:
            doomed = [key for key in self._throughput if key[0] < before]
            for key in doomed:
                del self._throughput[key]
        return len(doomed)

    def table_stats(self) -> list[port.TableStats]:
        return []

    def vacuum(self, tables: Sequence[str]) -> list[str]:
        return []
