"""Waiting claims: a connection of the listening pool LISTENs on the queue's channel (ADR 011).

The row is the truth: a waiter only shortens the wait, so a lost notification, a dead
listener or no free listening connection costs one poll interval, never a job. A listening
connection is given back on the waiting thread itself, after ``UNLISTEN *`` and a drain of
what arrived for it (no reset task on the pool's worker, which one stuck connection would
block for everybody); one that fails there is closed and discarded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed

from alkstore._time import StopToken
from alkstore.engine import Waiter
from alkstore.errors import StoreClosed

from ._errors import raise_translated
from ._sql import Statements

__all__ = ["Listening"]

log = logging.getLogger("alkstore.postgres")

#: How long a parked claim waits for a listening connection before it falls back to polling.
_CHECKOUT_S = 1.0
#: How often (wall seconds) a listening wait looks at its stop token.
_STOP_SLICE_S = 0.2

Connection = psycopg.Connection[tuple[Any, ...]]


class Listening:
    """Lends listening connections to parked claims, and takes them back clean."""

    def __init__(
        self, pool: ConnectionPool[Connection], sql: Statements, schema: str, closing: threading.Event
    ) -> None:
        self._pool = pool
        self._sql = sql
        self._schema = schema
        self._closing = closing

    @contextmanager
    def waiter(self, queues: tuple[str, ...], pool_timeout: float) -> Iterator[Waiter]:
        """A waiter for ``queues``: listening if a connection is free within a second, else polling."""
        try:
            conn = self._pool.getconn(timeout=min(pool_timeout, _CHECKOUT_S))
        except PoolClosed as exc:
            raise StoreClosed("this store is closed") from exc
        except psycopg.Error as exc:
            log.debug("no listening connection for %s (%s); the wait polls", list(queues), exc)
            yield _PollingWaiter(self._closing)
            return
        try:
            try:
                for queue in queues:
                    conn.execute(self._sql.listen, {"schema": self._schema, "queue": queue})
            except psycopg.Error as exc:
                raise_translated(exc)  # the connection goes back (or is discarded) below
            yield _ListeningWaiter(conn, ", ".join(queues), self._closing)
        finally:
            self._give_back(conn)

    def _give_back(self, conn: Connection) -> None:
        if conn.closed:  # a listener that died, or was discarded above
            self._discard(conn)
            return
        try:
            conn.execute(self._sql.unlisten, {})
            for _ in conn.notifies(timeout=0):  # drop what arrived for the last holder
                pass
        except psycopg.Error as exc:
            log.debug("discarding a listening connection that failed to UNLISTEN: %s", exc)
            self._discard(conn)
            return
        self._pool.putconn(conn)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        with suppress(PoolClosed):
            self._pool.putconn(conn)  # a closed connection is dropped, and its place freed


class _ListeningWaiter(Waiter):
    """Parks on a connection that LISTENs on the queue's channel."""

    def __init__(self, conn: Connection, queue: str, closing: threading.Event) -> None:
        self._conn: Connection | None = conn
        self._queue = queue
        self._closing = closing

    def __repr__(self) -> str:
        return f"<alkstore.adapters.postgres waiter queue={self._queue!r}>"

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        _sliced(timeout, self._closing, stop, self._listen)

    def _listen(self, step: float) -> bool:
        """Wait ``step`` seconds for a notification; whether one came."""
        if self._conn is None:
            self._closing.wait(step)
            return False
        try:
            for _ in self._conn.notifies(timeout=step, stop_after=1):
                return True
        except psycopg.Error as exc:
            # The row is the truth: a dead listener only turns the rest of the wait into polling.
            log.warning("listening for queue %r failed (%s); polling instead", self._queue, exc)
            self._conn = None
        return False


class _PollingWaiter(Waiter):
    """Used when no listening connection is free: each wait sleeps its whole timeout (or until close or stop)."""

    def __init__(self, closing: threading.Event) -> None:
        self._closing = closing

    def __repr__(self) -> str:
        return "<alkstore.adapters.postgres polling waiter>"

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        _sliced(timeout, self._closing, stop, self._sleep)

    def _sleep(self, step: float) -> bool:
        self._closing.wait(step)
        return False


def _sliced(timeout: float, closing: threading.Event, stop: StopToken | None, step: Callable[[float], bool]) -> None:
    """Run ``step(seconds)`` until it says a job may be ready, ``timeout`` passes, the engine closes
    or ``stop`` is cancelled; with a stop token, in slices short enough to notice it soon."""
    end = time.monotonic() + timeout
    while not closing.is_set() and not (stop is not None and stop.is_cancelled()):
        left = end - time.monotonic()
        if left <= 0 or step(left if stop is None else min(left, _STOP_SLICE_S)):
            return
