# GENERATED FILE, DO NOT EDIT: made from core/alkstore/worker/_runs_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""A worker's run table: the jobs it holds (running in a slot, or waiting for one), and the waits on it.

The claim loop waits here for a free slot; a slot marks a run started or finished; liveness gives
runs up; a stopping worker gives up the waiting ones at once and drains the running ones within
its grace, then hands back (``hand_back``) what it gave up. Every change happens under one
condition, which wakes whoever waits.

Claims take turns: one round at a time claims for every free slot, by the claim loop or by a slot
whose run just ended (``take_turn``), which so claims its own next job without waking the claim
loop (ADR 049).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError
from alkstore.port._acompat import Condition
from alkstore.port._time import StopToken

from ._parts import Run, Tally

if TYPE_CHECKING:
    from alkstore.store._job import Job
    from alkstore.store._kernel import Kernel

__all__ = ["Runs", "hand_back"]

log = logging.getLogger("alkstore.worker")


class Runs:
    """The runs of one worker, by job id, and its ``slots`` (how many it may hold at once)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._cond = Condition()
        self._waiting = 0  # how many wait on the condition (counted under it): a change nobody waits for wakes no one
        self._by_id: dict[int, Run] = {}
        self._turn = False  # a claim round is under way

    def _wait(self, timeout: float) -> None:
        """Wait on the condition (held) until woken or ``timeout`` wall seconds passed."""
        self._waiting += 1
        try:
            self._cond.wait(timeout)
        finally:
            self._waiting -= 1

    def _wake(self) -> None:
        """Wake whoever waits on the condition (held): the claim loop for a slot, a drain for the runs'
        end. Nobody waiting (most changes of a busy worker's runs), nothing is done."""
        if self._waiting:
            self._cond.notify_all()

    def live(self) -> list[Run]:
        """The runs not given up (read without the condition: the list is a snapshot)."""
        return [run for run in list(self._by_id.values()) if not run.abandoned]

    def _held(self) -> int:
        """How many runs are not given up (under the condition; counted without building ``live``'s list,
        twice a job)."""
        held = len(self._by_id)
        for run in self._by_id.values():
            if run.abandoned:
                held -= 1
        return held

    def running(self) -> int:
        """How many runs are in a slot now."""
        return sum(1 for run in self.live() if run.running)

    def free(self, stop: StopToken, abort: StopToken) -> int:
        """Wait for at least one free slot and the claiming turn (or a stop); how many are free. The turn is
        the caller's until ``end_turn``."""
        with self._cond:
            while not stop.is_cancelled() and not abort.is_cancelled():
                free = self.slots - self._held()
                if free > 0 and not self._turn:
                    self._turn = True
                    return free
                self._wait(0.2)
        return 0

    def more_free(self, want: int, timeout: float) -> int:
        """With the turn held, wait up to ``timeout`` wall seconds for ``want`` free slots (ADR 022,
        amended); how many are free then."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (free := self.slots - self._held()) < want and (left := deadline - time.monotonic()) > 0:
                self._wait(left)
            return free

    def take_turn(self, run: Run) -> int:
        """A slot whose ``run`` ended claims next: ``run`` is forgotten, and the turn is the slot's until
        ``end_turn``; how many slots are free. ``0`` while another round is under way or claimed jobs wait
        for a slot (the slot takes those instead): ``run`` is forgotten as ``finished`` does, with one
        turn of the condition a job either way."""
        with self._cond:
            if self._by_id.get(run.job.id) is run:
                del self._by_id[run.job.id]
            if not self._turn:
                for other in self._by_id.values():
                    if not other.running and not other.abandoned:
                        break  # a claimed job waits for a slot
                else:
                    self._turn = True
                    return self.slots - self._held()
            self._wake()
            return 0

    def end_turn(self) -> None:
        """The round ended: the next may begin (the claim loop is woken only if slots are still free)."""
        with self._cond:
            self._turn = False
            if self.slots > self._held():
                self._wake()

    def add(self, runs: list[Run]) -> None:
        """Jobs were claimed (by one claim): they wait for a slot."""
        with self._cond:
            by_id = self._by_id
            for run in runs:
                by_id[run.job.id] = run

    def start(self, job: Job) -> Run | None:
        """Mark the run of ``job`` running in a slot; ``None`` (and it is forgotten) if it was given up meanwhile."""
        with self._cond:
            run = self._by_id.get(job.id)
            if run is None or run.abandoned:
                if run is not None:
                    del self._by_id[job.id]
                    self._wake()
                return None
            run.running = True
            return run

    def finished(self, run: Run) -> None:
        """Forget a run that ended, and wake whoever waits for a slot."""
        with self._cond:
            if self._by_id.get(run.job.id) is run:
                del self._by_id[run.job.id]
            self._wake()

    def abandon(self, run: Run) -> bool:
        """Give ``run`` up (its outcome will not count); whether it was still live."""
        with self._cond:
            if run.abandoned:
                return False
            run.abandoned = True
            self._wake()
            return True

    def abandon_waiting(self) -> list[Run]:
        """Give up the runs still waiting for a slot; those runs."""
        with self._cond:
            waiting = [run for run in self._by_id.values() if not run.running and not run.abandoned]
            for run in waiting:
                run.abandoned = True
            return waiting

    def drain(self, grace: float, abort: StopToken) -> list[Run]:
        """Wait up to ``grace`` wall seconds (or until ``abort``) for the live runs to end; give up the rest."""
        deadline = time.monotonic() + grace
        with self._cond:
            while not abort.is_cancelled():
                left = deadline - time.monotonic()
                if not self.live() or left <= 0:
                    break
                self._wait(min(left, 0.1))
            remaining = self.live()
            for run in remaining:
                run.abandoned = True
            return remaining


def hand_back(kernel: Kernel, runs: list[Run], what: str, tally: Tally, label: str) -> None:
    """Release the jobs of given-up ``runs`` (``what`` they were doing: running, waiting) for another worker
    to take at once, their attempt not spent; ``label`` names the worker in the log."""
    if not runs:
        return
    for run in runs:
        run.job.stop.cancel()
    held = [run.job for run in runs]
    try:
        stale = kernel.release_many(held)
    except AlkstoreError as exc:
        log.error(
            "worker %s could not hand back %d %s jobs (%s); they run again once their leases lapse",
            label,
            len(held),
            what,
            exc,
        )
        return
    released = len(held) - len(stale)
    tally.add(released=released)
    log.info(
        "worker %s handed back %d %s job%s (%s) for another worker to take at once",
        label,
        released,
        what,
        "" if released == 1 else "s",
        ", ".join(str(run.job.id) for run in runs if run.job.id not in stale),
    )
