"""Scheduler runners on threads, and a manual clock that can hold a runner asleep.

Tests step a ``ManualClock`` and wait (with generous wall-clock timeouts) for runner threads
to park again; nothing here waits on wall time for a boundary.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from datetime import datetime
from typing import Any, Self

from alkstore import Fire, LeadershipLost, ManualClock, StopToken, Store
from tests.support import PATIENCE, wait_until

from ._runtimes import portal

__all__ = [
    "ON_BEHALF",
    "PROGRESS_TIMEOUT",
    "HoldingClock",
    "Runner",
    "Standby",
    "cancelled",
    "helper",
    "step",
    "stop_all",
    "wait_until",
]

#: How long (wall seconds) a test waits for a thread to make progress on a loaded machine.
PROGRESS_TIMEOUT = PATIENCE


def cancelled() -> StopToken:
    """A stop token that is already cancelled: a runner given it leads (if it can) and returns at once."""
    token = StopToken()
    token.cancel()
    return token


def step(clock: ManualClock, sleepers: int, seconds: float = 1) -> datetime:
    """Advance ``clock`` and wait until ``sleepers`` threads are parked on it again; return the new now."""
    now = clock.advance(seconds)
    clock.wait_for_sleepers(sleepers, timeout=PROGRESS_TIMEOUT)
    return now


#: The thread a call of the async runtime runs for (the portal copies it into the task it runs).
ON_BEHALF: contextvars.ContextVar[threading.Thread | None] = contextvars.ContextVar("on_behalf", default=None)


class HoldingClock(ManualClock):
    """A ``ManualClock`` that can keep chosen sleepers asleep past their deadline until released.

    Lets a test move time while a runner is frozen mid-sleep, the way a paused process is. A
    sleeper is a thread (the sync runtime's), or a task of the async runtime: one ``helper``
    found, or any that runs for a held thread (``ON_BEHALF``).
    """

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self._gate = threading.Condition()
        self._held: set[object] = set()

    def hold(self, sleeper: object) -> None:
        """From now on, ``sleeper`` does not return from its sleep until ``release``."""
        with self._gate:
            self._held.add(sleeper)

    def release(self, sleeper: object) -> None:
        """Let ``sleeper`` wake from its sleep again."""
        with self._gate:
            self._held.discard(sleeper)
            self._gate.notify_all()

    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        super().sleep(seconds, stop)
        me = threading.current_thread()
        with self._gate:
            while me in self._held and not (stop is not None and stop.is_cancelled()):
                self._gate.wait(0.01)

    async def sleep_async(self, seconds: float, stop: StopToken | None = None) -> None:
        await super().sleep_async(seconds, stop)
        task, thread = asyncio.current_task(), ON_BEHALF.get()
        while (task in self._held or thread in self._held) and not (stop is not None and stop.is_cancelled()):
            await asyncio.sleep(0.01)


def helper(prefix: str) -> object:
    """The one worker helper named ``prefix``…: a thread of the sync runtime, a task of the async one."""
    threads = [thread for thread in threading.enumerate() if thread.name.startswith(prefix)]
    if threads:
        (found,) = threads
        return found
    loop = portal().loop

    def tasks() -> list[asyncio.Task[Any]]:
        return [task for task in asyncio.all_tasks(loop) if task.get_name().startswith(prefix)]

    (task,) = portal().call(tasks)
    return task


class Runner:
    """``store.run_schedules`` on its own thread, recording its fires and how it ended."""

    def __init__(self, store: Store, name: str = "runner") -> None:
        self.store = store
        self.stop = StopToken()
        self.fires: list[Fire] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        _started.append(self)

    def start(self) -> Self:
        self.thread.start()
        return self

    def _main(self) -> None:
        ON_BEHALF.set(self.thread)
        try:
            self._run()
        except BaseException as exc:
            self.error = exc

    def _run(self) -> None:
        self.store.run_schedules(self.stop, on_fire=self.fires.append)

    def ended(self, timeout: float = PROGRESS_TIMEOUT) -> bool:
        """Wait for the thread to end on its own; whether it did."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def finish(self) -> BaseException | None:
        """Cancel, wait for the thread to end, and return what it raised (``None`` for a clean return)."""
        self.stop.cancel()
        if not self.ended():
            raise AssertionError(f"{self.thread.name} did not stop within {PROGRESS_TIMEOUT} s")
        return self.error

    @property
    def boundaries(self) -> list[datetime]:
        return [fire.boundary for fire in self.fires]


_started: list[Runner] = []


def stop_all() -> list[str]:
    """Cancel every runner started so far (a failed test must not leave one running); the ones that hung."""
    hung = []
    while _started:
        runner = _started.pop()
        runner.stop.cancel()
        if runner.thread.ident is not None and not runner.ended(PROGRESS_TIMEOUT):
            hung.append(runner.thread.name)
    return hung


class Standby(Runner):
    """A runner that, refused leadership, sleeps one second of the clock and tries again."""

    def __init__(self, store: Store, clock: ManualClock, name: str = "standby") -> None:
        super().__init__(store, name)
        self.clock = clock
        self.refusals = 0

    def _run(self) -> None:
        while not self.stop.is_cancelled():
            try:
                self.store.run_schedules(self.stop, on_fire=self.fires.append)
            except LeadershipLost:
                self.refusals += 1
                self.clock.sleep(1, self.stop)
            else:
                return
