"""The clock and stop-token ports: engines and the runner read time and wait only through them."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta

from .errors import InvalidOptions

__all__ = ["Clock", "ManualClock", "StopToken", "SystemClock", "as_utc", "wall_sleep"]


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
    """A thread-safe, one-way stop signal handed to long-running loops."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask every loop holding this token to stop at its next check."""
        self._event.set()

    def is_cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block (wall time) until cancelled or ``timeout`` seconds passed; return ``is_cancelled()``."""
        return self._event.wait(timeout)

    def __repr__(self) -> str:
        return f"<alkstore.StopToken cancelled={self.is_cancelled()}>"


class Clock(ABC):
    """Where engines and the scheduler runner read the time and sleep, so tests can drive it."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    @abstractmethod
    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        """Wait ``seconds`` of this clock's time; return early once ``stop`` is cancelled."""


def wall_sleep(seconds: float, stop: StopToken | None = None) -> None:
    """Wait ``seconds`` of wall time, or until ``stop`` is cancelled: how real clocks sleep."""
    if seconds <= 0:
        return
    if stop is None:
        time.sleep(seconds)
    else:
        stop.wait(seconds)


class SystemClock(Clock):
    """The wall clock of this host (UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float, stop: StopToken | None = None) -> None:
        wall_sleep(seconds, stop)

    def __repr__(self) -> str:
        return "<alkstore.SystemClock>"


class ManualClock(Clock):
    """A clock that moves only when told to (``set``/``advance``), for deterministic tests.

    Instants must be timezone-aware and steps forward and finite; anything else raises
    ``InvalidOptions`` (a ``ValueError``), and the clock stays where it was. ``sleep`` blocks
    the calling thread until another thread moves the clock past the sleeper's deadline (or
    its stop token is cancelled); ``wait_for_sleepers`` lets a test step a sleeping runner in
    lockstep.
    """

    _STOP_POLL_S = 0.005

    def __init__(self, start: datetime) -> None:
        self._now = as_utc(start, "start")
        self._cond = threading.Condition()
        self._deadlines: list[datetime] = []

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def set(self, instant: datetime) -> None:
        """Jump to ``instant`` (forwards or backwards) and wake sleepers that are due."""
        with self._cond:
            self._now = as_utc(instant, "instant")
            self._cond.notify_all()

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move forward by ``seconds`` and wake sleepers that are due; return the new instant."""
        step = _step(seconds)
        with self._cond:
            try:
                self._now += step
            except OverflowError:
                raise InvalidOptions(f"advancing {self._now.isoformat()} by {step} passes the last instant") from None
            self._cond.notify_all()
            return self._now

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
