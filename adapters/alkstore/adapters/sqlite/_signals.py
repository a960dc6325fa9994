"""Wake-ups without a server: parked claims of this process hear its commits at once, and every other
connection's commits (other processes, a caller's own connection) through the file's data version.

SQLite has no LISTEN/NOTIFY. ``PRAGMA data_version`` on a connection changes whenever another
connection committed to the file, so a watcher thread (started by the first parked waiter, one per
engine) reads it every ``poll_interval`` seconds on a connection of its own and, when it moved,
wakes every waiter: the claim that follows finds out whether the change was a job (a spurious
wake is allowed by the port). The engine's own commits that made jobs claimable signal directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from typing import Any

from alkstore.engine import StopToken

from . import _statements as sql
from ._options import SqliteOptions
from ._tables import connect

__all__ = ["Signals"]

#: How often (wall seconds) a parked sync wait looks at its stop token.
_STOP_POLL_S = 0.05


class Signals:
    """A count of wake-ups (this process's commits and the data version's moves), and who waits on it."""

    def __init__(self, options: SqliteOptions) -> None:
        self._options = options
        #: The condition's lock, entered by itself where the condition is not waited on (``signal``, ``count``):
        #: the same lock, but entered in C, where ``Condition.__enter__`` and ``__exit__`` are two Python calls.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._count = 0
        #: Sync waits parked on the condition now: a signal with none notifies nobody (most commits' case).
        self._parked = 0
        self._closed = False
        self._listeners: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._watcher: threading.Thread | None = None

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def signal(self) -> None:
        """Jobs may have become claimable: wake every parked wait of this engine."""
        with self._lock:
            self._count += 1
            if self._parked:
                self._cond.notify_all()
            if not self._listeners:
                return
            listeners, self._listeners = self._listeners, []
        for loop, future in listeners:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing waits there any more
                loop.call_soon_threadsafe(_resolve, future)

    def close(self) -> None:
        with self._cond:
            self._closed = True
        self.signal()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=5)

    def watch(self) -> None:
        """Start the watcher of the file's data version, once. Its baseline is read here, before the first
        waiter takes its own, so that a commit between the two is heard, not lost until the waiter's timeout."""
        with self._cond:
            if self._watcher is not None or self._closed:
                return
            try:
                db = connect(self._options)
                seen = db.execute(sql.DATA_VERSION).fetchone()[0]
            except sqlite3.Error:
                return  # waiters still hear this process's commits, and poll at their timeout
            self._watcher = threading.Thread(
                target=self._watch, args=(db, seen), name="alkstore-sqlite-watcher", daemon=True
            )
            self._watcher.start()

    def _watch(self, db: sqlite3.Connection, seen: int) -> None:
        try:
            while True:
                time.sleep(self._options.poll_interval)
                with self._cond:
                    if self._closed:
                        return
                try:
                    version = db.execute(sql.DATA_VERSION).fetchone()[0]
                except sqlite3.Error:
                    continue
                if version != seen:
                    seen = version
                    self.signal()
        finally:
            db.close()

    def wait(self, seen: int, timeout: float, stop: StopToken | None) -> int:
        """Block until the count moved past ``seen``, ``timeout`` passed, the engine closed or ``stop`` was
        cancelled; the count then."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._count == seen and not self._closed and not (stop is not None and stop.is_cancelled()):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._parked += 1
                try:
                    self._cond.wait(left if stop is None else min(left, _STOP_POLL_S))
                finally:
                    self._parked -= 1
            return self._count

    async def wait_async(self, seen: int, timeout: float, stop: StopToken | None) -> int:
        """``wait`` for a task of a running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._count != seen or self._closed:
                return self._count
            self._listeners.append((loop, future))
        waits: set[asyncio.Future[Any]] = {future}
        stopped = None
        if stop is not None:
            stopped = asyncio.ensure_future(stop.wait_async(timeout))
            waits.add(stopped)
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stopped is not None and not stopped.done():
                stopped.cancel()
            with self._cond:
                if (loop, future) in self._listeners:
                    self._listeners.remove((loop, future))
        return self.count


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
