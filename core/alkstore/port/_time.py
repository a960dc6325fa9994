"""The clock and stop-token ports: engines and the runner read time and wait only through them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta

from alkstore.errors import InvalidOptions

__all__ = [
    "Clock",
    "ManualClock",
    "StopToken",
    "SystemClock",
    "WallClock",
    "as_utc",
    "wall_sleep",
    "wall_sleep_async",
]


def as_utc(value: object, what: str, error: type[Exception] = InvalidOptions) -> datetime:
    """``value`` as a UTC ``datetime``; naive datetimes, instants with no UTC equivalent (the
    first or last representable day under an offset) and other types raise ``error``."""
    if not isinstance(value, datetime):
        raise error(f"{what} must be a timezone-aware datetime, not {type(value).__name__}")
    try:
        offset = value.utcoffset()
    except Exception as exc:  # a tzinfo of the caller's whose utcoffset() fails or returns junk
        raise error(f"{what} has a time zone whose offset cannot be read: {type(exc).__name__}: {exc}") from None
    if offset is None:
        raise error(f"{what} must be timezone-aware, not naive ({value.isoformat()})")
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):  # ValueError: an offset of a day or more, refused by datetime itself
        raise error(f"{what} ({value.isoformat()}) has no UTC equivalent within the representable range") from None


class StopToken:
    """A thread-safe, one-way stop signal handed to long-running loops, threads and tasks alike.

    ``cancel()`` may be called from any thread (a signal handler's too); ``wait`` blocks a thread,
    ``wait_async`` a task, and both return as soon as it is cancelled.
    """

    __slots__ = ("_event", "_lock", "_waiters")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def cancel(self) -> None:
        """Ask every loop holding this token to stop at its next check."""
        self._event.set()
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing waits there any more
                loop.call_soon_threadsafe(_resolve, future)

    def is_cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block (wall time) until cancelled or ``timeout`` seconds passed; return ``is_cancelled()``."""
        return self._event.wait(timeout)

    async def wait_async(self, timeout: float | None = None) -> bool:
        """``wait`` for a task: until cancelled or ``timeout`` wall seconds passed; return ``is_cancelled()``."""
        if self._event.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        future = self._future()
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            pass
        finally:
            self._forget(future)
        return self._event.is_set()

    def _future(self) -> asyncio.Future[None]:
        """A future of the running loop resolved when this token is cancelled (at once if it is)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._event.is_set():
                future.set_result(None)
            else:
                self._waiters.append((loop, future))
        return future

    def _forget(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters = [waiter for waiter in self._waiters if waiter[1] is not future]

    def __repr__(self) -> str:
        return f"<alkstore.StopToken cancelled={self.is_cancelled()}>"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Clock(ABC):
    """Where engines and the scheduler runner read the time and sleep, so tests can drive it."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    @abstractmethod
    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        """Wait ``seconds`` of this clock's time; return early once ``stop`` is cancelled."""

    async def sleep_async(self, seconds: float, stop: StopToken | None = None) -> None:
        """``sleep`` for a task. This default runs ``sleep`` on a thread; clocks that can wait on a
        loop (all of alkstore's) override it."""
        await asyncio.to_thread(self.sleep, seconds, stop)


def wall_sleep(seconds: float, stop: StopToken | None = None) -> None:
    """Wait ``seconds`` of wall time, or until ``stop`` is cancelled: how real clocks sleep."""
    if seconds <= 0:
        return
    if stop is None:
        time.sleep(seconds)
    else:
        stop.wait(seconds)


async def wall_sleep_async(seconds: float, stop: StopToken | None = None) -> None:
    """``wall_sleep`` for a task."""
    if seconds <= 0:
        return
    if stop is None:
        await asyncio.sleep(seconds)
    else:
        await stop.wait_async(seconds)


class WallClock(Clock):
    """A clock that sleeps in wall time (monotonic), whatever its ``now()`` reads: the real clocks' base."""

    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        wall_sleep(seconds, stop)

    async def sleep_async(self, seconds: float, stop: StopToken | None = None) -> None:
        await wall_sleep_async(seconds, stop)


class SystemClock(WallClock):
    """The wall clock of this host (UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "<alkstore.SystemClock>"


class ManualClock(Clock):
    """A clock that moves only when told to (``set``/``advance``), for deterministic tests.

    Instants must be timezone-aware and steps forward and finite; anything else raises
    ``InvalidOptions`` (a ``ValueError``), and the clock stays where it was. ``sleep`` blocks
    the calling thread (``sleep_async`` the calling task) until the clock is moved past the
    sleeper's deadline (or its stop token is cancelled); ``wait_for_sleepers`` lets a test step
    a sleeping runner in lockstep, whichever runtime it sleeps in.
    """

    _STOP_POLL_S = 0.005

    def __init__(self, start: datetime) -> None:
        self._now = as_utc(start, "start")
        self._cond = threading.Condition()
        self._deadlines: list[datetime] = []
        #: Tasks asleep on this clock: their deadline, and the future that wakes them on their loop.
        self._sleepers: list[tuple[datetime, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def set(self, instant: datetime) -> None:
        """Jump to ``instant`` (forwards or backwards) and wake sleepers that are due."""
        with self._cond:
            self._now = as_utc(instant, "instant")
            self._wake()

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move forward by ``seconds`` and wake sleepers that are due; return the new instant."""
        step = _step(seconds)
        with self._cond:
            try:
                self._now += step
            except OverflowError:
                raise InvalidOptions(f"advancing {self._now.isoformat()} by {step} passes the last instant") from None
            self._wake()
            return self._now

    def _wake(self) -> None:
        """Wake the threads (to look again) and the tasks whose deadline has come (under the lock)."""
        self._cond.notify_all()
        due = [sleeper for sleeper in self._sleepers if sleeper[0] <= self._now]
        if due:
            self._sleepers = [sleeper for sleeper in self._sleepers if sleeper[0] > self._now]
        for _, loop, future in due:
            with contextlib.suppress(RuntimeError):  # its loop closed
                loop.call_soon_threadsafe(_resolve, future)

    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        with self._cond:
            deadline = self._now + timedelta(seconds=max(seconds, 0.0))
            self._deadlines.append(deadline)
            self._cond.notify_all()
            try:
                while self._now < deadline and not (stop is not None and stop.is_cancelled()):
                    self._cond.wait(self._STOP_POLL_S if stop is not None else None)
            finally:
                self._deadlines.remove(deadline)
                self._cond.notify_all()

    async def sleep_async(self, seconds: float, stop: StopToken | None = None) -> None:
        """``sleep`` for a task: until the clock is moved past the deadline, or ``stop`` is cancelled."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        with self._cond:
            deadline = self._now + timedelta(seconds=max(seconds, 0.0))
            if self._now >= deadline:
                return
            self._deadlines.append(deadline)
            self._sleepers.append((deadline, loop, woken))
            self._cond.notify_all()
        stopped = stop._future() if stop is not None else None
        try:
            waits: set[asyncio.Future[None]] = {woken} if stopped is None else {woken, stopped}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stop is not None and stopped is not None:
                stop._forget(stopped)
            with self._cond:
                self._deadlines.remove(deadline)
                self._sleepers = [sleeper for sleeper in self._sleepers if sleeper[2] is not woken]
                self._cond.notify_all()

    def parked(self) -> int:
        """How many threads are asleep on this clock with a deadline still in the future."""
        with self._cond:
            return sum(1 for deadline in self._deadlines if deadline > self._now)

    def wait_for_sleepers(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block (wall time) until ``count`` threads are parked in ``sleep``; ``TimeoutError`` if not."""
        end = time.monotonic() + timeout
        with self._cond:
            while sum(1 for deadline in self._deadlines if deadline > self._now) < count:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"fewer than {count} sleepers parked on the clock after {timeout} s")
                self._cond.wait(remaining)

    def __repr__(self) -> str:
        return f"<alkstore.ManualClock now={self.now().isoformat()}>"


def _step(seconds: object) -> timedelta:
    """``ManualClock.advance``'s argument as a non-negative ``timedelta`` (``InvalidOptions`` otherwise)."""
    if isinstance(seconds, timedelta):
        step = seconds
    elif isinstance(seconds, int | float) and not isinstance(seconds, bool):
        try:
            step = timedelta(seconds=seconds)
        except (OverflowError, ValueError):  # inf, nan, or past timedelta's range
            raise InvalidOptions(f"cannot advance by {seconds!r} seconds") from None
    else:
        raise InvalidOptions(f"advance() takes seconds or a timedelta, not {type(seconds).__name__}")
    if step < timedelta(0):
        raise InvalidOptions("advance() moves forwards only; use set() to go back")
    return step
