"""The Postgres engine's connections: its two pools, and the one way a call borrows from them.

Every call takes one connection of the main pool (psycopg_pool) in autocommit mode, runs its
statement(s) and gives it back; psycopg errors raised meanwhile are translated there, once.
Claims parked in a wait hold a connection of the listening pool (``_waiting_async``), which may
point elsewhere (a direct or session-pooled server when the main URL goes through a transaction
pooler). The listening pool is this module's own, without a worker of its own (ADR 019): a parked
claim opens a connection itself, and gives up on it, and polls, if it is not serving within
``OPEN_S``; so no claim ever waits behind another's stuck connection, and ``close()`` waits for
nothing.

A store holds at most ``max_size + listen_max_size`` connections at once.
"""

from __future__ import annotations

import logging
import math
import select
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGconn
from psycopg.rows import BaseRowFactory, tuple_row
from psycopg_pool import AsyncConnectionPool

from alkstore.engine import ASYNC
from alkstore.errors import StoreClosed

from ._errors import raise_translated
from ._options import EngineOptions
from ._positional import positional
from ._sql import Statements

if ASYNC:
    import asyncio

__all__ = [
    "OPEN_S",
    "AsyncConnections",
    "AsyncListeningConnection",
    "AsyncListeningPool",
    "AsyncPooledConnection",
    "AsyncRecentFirstPool",
    "check_connection",
]

log = logging.getLogger("alkstore.postgres")

_R = TypeVar("_R")
_T = TypeVar("_T")
#: ``select.poll`` where the platform has it (the pools' check falls back to a round trip).
_POLL = getattr(select, "poll", None)
#: Wall seconds a parked claim gives a new listening connection to connect and serve a first round
#: trip before it gives up on it and polls (libpq's own connect timeout cannot be shorter than 2 s).
OPEN_S = 2.0
#: Wall seconds an idle listening connection is kept before it is closed (at the pool's next use).
_LISTEN_MAX_IDLE_S = 60.0


class AsyncPooledConnection(psycopg.AsyncConnection[tuple[Any, ...]]):
    """A connection of the engine's main pool, keeping a cursor per row shape for the engine's statements.

    ``execute`` builds a cursor (and its adaptation context) for every statement; the hot calls
    reuse one instead. The pool lends the connection to one caller at a time, so its cursors
    are never shared, and they go with it.
    """

    def __init__(self, pgconn: PGconn, row_factory: Any = tuple_row) -> None:
        super().__init__(pgconn, row_factory)
        self._kept: dict[object, psycopg.AsyncCursor[Any]] = {}

    async def run(
        self,
        statement: str,
        params: Mapping[str, Any],
        row: BaseRowFactory[_R],
        *,
        binary: bool = False,
    ) -> psycopg.AsyncCursor[_R]:
        """Execute ``statement`` on the kept cursor for ``row`` (text or binary results) and return it.

        Prepared at its first run on this connection, not its sixth (psycopg's threshold): each of
        the five before would be parsed and planned again, the claim's planning alone costing more
        than its run (ADR 053). ``prepare_threshold=None`` still prepares nothing. A statement that
        can be made positional (``_positional``) runs on a raw cursor, sent as it is rather
        than converted again at each call.
        """
        raw = positional(statement)
        if raw is None:
            cursor = self._kept.get(row)
            if cursor is None or cursor.closed:
                cursor = self._kept[row] = self.cursor(row_factory=row)
            return await cursor.execute(statement, params, binary=binary, prepare=True)
        key = (row, "raw")
        cursor = self._kept.get(key)
        if cursor is None or cursor.closed:
            cursor = self._kept[key] = psycopg.AsyncRawCursor(self, row_factory=row)
        return await cursor.execute(raw.query, raw.values(params), binary=binary, prepare=True)


class AsyncRecentFirstPool(AsyncConnectionPool[AsyncPooledConnection]):
    """psycopg_pool's pool, lending the connection given back last first (ADR 053).

    psycopg_pool lends the one idle longest, which spreads even one caller at a time over every
    connection: each prepares and plans the engine's statements for itself, and each call meets a
    backend that has sat idle longest. Given back last, lent first keeps a worker's claims and an
    idle worker's wakes on one warm connection; the pool's shrinking still closes the idlest.
    """

    async def _get_ready_connection(self, timeout: float | None) -> AsyncPooledConnection | None:
        # Called in the pool's critical section; the parent takes the left end of its deque.
        if len(self._pool) > 1:
            self._pool.rotate(1)
        return await super()._get_ready_connection(timeout)


async def check_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pools' check: a round trip only if the idle connection's socket has something to say.

    An idle connection the server dropped (terminated backend, restart) has a readable socket
    (the error message, or EOF), so the pool discards it and hands out another; a healthy one
    costs a ``poll`` system call, not a round trip.
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    if _POLL is not None:
        poller = _POLL()
        poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        if not poller.poll(0):
            return
    await AsyncConnectionPool.check_connection(conn)


class AsyncConnections:
    """The main pool and the listening pool of one engine, and how calls borrow from them."""

    def __init__(self, options: EngineOptions, sql: Statements) -> None:
        self._sql = sql
        kwargs = options.connect_kwargs
        self.pool: AsyncConnectionPool[AsyncPooledConnection] = AsyncRecentFirstPool(
            options.url,
            connection_class=AsyncPooledConnection,
            kwargs=kwargs,
            min_size=options.min_size,
            max_size=options.max_size,
            open=False,
            configure=self._configure,
            check=None,  # checked by _getconn instead, without the pool's pauses
            timeout=options.pool_timeout,
            name=f"alkstore:{options.schema}",
            num_workers=2,
        )
        self.listen_pool = AsyncListeningPool(
            options.listen_url,
            {**kwargs, "connect_timeout": math.ceil(OPEN_S)},
            options.listen_max_size,
            sql.use_utc.encode(),
        )

    async def open(self) -> None:
        await self.pool.open(wait=False)

    async def close(self) -> None:
        await self.listen_pool.close()
        await self.pool.close()

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(self._sql.use_utc)  # no parameters: sent as it is, not converted

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncPooledConnection]:
        """A pooled autocommit connection; psycopg errors inside become alkstore errors.

        ``getconn``/``putconn`` rather than ``pool.connection()``, whose exit also runs the
        connection's own ``with`` exit: a commit that autocommit makes a no-op, but not a free one.
        """
        conn = await self._getconn()
        try:
            yield conn
        except psycopg.Error as exc:
            raise_translated(exc)
        finally:
            await self.pool.putconn(conn)

    @asynccontextmanager
    async def lend(self, wait: float | None = None) -> AsyncIterator[AsyncPooledConnection]:
        """A checked connection of the main pool, for a caller that handles the psycopg errors of its body."""
        conn = await self._getconn(wait)
        try:
            yield conn
        finally:
            await self.pool.putconn(conn)

    async def _getconn(self, wait: float | None = None) -> AsyncPooledConnection:
        """A connection of the main pool that passed ``check_connection``; ``wait``: the most seconds to wait.

        A dead one (the server restarted, its backend was terminated) is closed and given back, for
        the pool to replace at once, and the next one taken without a pause: the pool's own check
        sleeps 1 s, then 2 s, then 4 s between dead connections, so every call after a restart
        stalled for seconds, past a short lease (ADR 050).
        """
        deadline = time.monotonic() + (self.pool.timeout if wait is None else wait)
        try:
            while True:
                conn = await self.pool.getconn(max(deadline - time.monotonic(), 0.0))
                try:
                    await check_connection(conn)
                except psycopg.Error:
                    await conn.close()
                    await self.pool.putconn(conn)
                    continue
                except BaseException:
                    await self.pool.putconn(conn)
                    raise
                return conn
        except psycopg.Error as exc:
            raise_translated(exc)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncPooledConnection]:
        """A pooled connection inside a transaction of the engine's own (commit on exit, rollback on error)."""
        async with self.connection() as conn:
            try:
                async with conn.transaction():
                    yield conn
            except psycopg.Error as exc:
                raise_translated(exc)

    async def one(
        self,
        statement: str,
        params: Mapping[str, Any],
        row: BaseRowFactory[_R],
        *,
        binary: bool = False,
        wait: float | None = None,
    ) -> _R | None:
        """Run one statement on a pooled connection; its first row, or ``None``.

        ``wait``: the most seconds to wait for a free connection, when less than ``pool_timeout``.
        """
        return await self._run(statement, params, row, binary, psycopg.AsyncCursor.fetchone, wait)  # type: ignore[no-any-return]

    async def all(
        self, statement: str, params: Mapping[str, Any], row: BaseRowFactory[_R], *, binary: bool = False
    ) -> list[_R]:
        """Run one statement on a pooled connection; all its rows."""
        return await self._run(statement, params, row, binary, psycopg.AsyncCursor.fetchall)  # type: ignore[no-any-return]

    async def two(
        self,
        first: str,
        first_params: Mapping[str, Any],
        first_row: BaseRowFactory[_R],
        second: str,
        second_params: Mapping[str, Any],
        second_row: BaseRowFactory[_T],
    ) -> tuple[list[_R], list[_T]]:
        """Run two statements on a pooled connection in one pipeline: sent together, one round trip, and one
        transaction (what the server runs between two Syncs of an autocommit connection is one implicit
        transaction: both commit at the Sync, or a failure rolls both back). The second sees what the
        first wrote, its triggers' writes included, which a statement of its own would not. The rows of
        each (the second's in binary); the row shapes must differ, so each statement has a kept cursor of its own.
        """
        if first_row is second_row:
            raise ValueError("two statements sent together need row shapes of their own")
        conn = await self._getconn()
        try:
            async with conn.pipeline():
                one = await conn.run(first, first_params, first_row)
                two = await conn.run(second, second_params, second_row, binary=True)
            return await one.fetchall(), await two.fetchall()
        except psycopg.Error as exc:
            raise_translated(exc)
        finally:
            await self.pool.putconn(conn)

    async def _run(
        self,
        statement: str,
        params: Mapping[str, Any],
        row: BaseRowFactory[Any],
        binary: bool,
        fetch: Callable[[psycopg.AsyncCursor[Any]], Any],
        wait: float | None = None,
    ) -> Any:
        """The hot calls' form of ``connection()``: the same checkout and translation, inline."""
        conn = await self._getconn(wait)
        try:
            return await fetch(await conn.run(statement, params, row, binary=binary))
        except psycopg.Error as exc:
            raise_translated(exc)
        finally:
            await self.pool.putconn(conn)


class AsyncListeningConnection(psycopg.AsyncConnection[tuple[Any, ...]]):
    """A connection of the listening pool."""


class AsyncListeningPool:
    """At most ``max_size`` listening connections, opened, lent and taken back by the claims that park.

    ``getconn`` lends an idle connection (most recently returned first), or opens a new one if
    fewer than ``max_size`` exist: it must connect and answer ``first_query`` within ``OPEN_S``,
    else it is closed (behind a session pooler with no server connection to spare, its first
    statement would wait for one indefinitely). ``None`` means none to spare: the claim polls.
    """

    def __init__(self, url: str, kwargs: Mapping[str, Any], max_size: int, first_query: bytes) -> None:
        self._url = url
        self._kwargs = dict(kwargs)
        self._max_size = max_size
        self._first_query = first_query
        self._lock = threading.Lock()
        self._idle: list[tuple[AsyncListeningConnection, float]] = []  # with the instant each came back
        self._size = 0  # idle, lent, and being opened
        self._closed = False
        self._warned = False

    async def getconn(self) -> AsyncListeningConnection | None:
        """A connection that is serving, or ``None`` if all are lent or a new one did not serve in time."""
        while True:
            with self._lock:
                if self._closed:
                    raise StoreClosed("this store is closed")
                stale = self._take_stale(time.monotonic())
                conn = self._idle.pop()[0] if self._idle else None
                opening = conn is None and self._size < self._max_size
                if opening:
                    self._size += 1
            await _close_all(stale)
            if conn is None:
                return await self._open() if opening else None
            try:
                await check_connection(conn)
            except psycopg.Error:
                await conn.close()
                await self.putconn(conn)  # dropped; look again
                continue
            return conn

    async def _open(self) -> AsyncListeningConnection | None:
        deadline = time.monotonic() + OPEN_S
        try:
            conn = await AsyncListeningConnection.connect(self._url, **self._kwargs)
        except BaseException:
            with self._lock:
                self._size -= 1
            raise
        try:
            serving = await _round_trip(conn, self._first_query, deadline)
        except psycopg.Error:
            serving = False
        except BaseException:
            await conn.close()
            await self.putconn(conn)
            raise
        if not serving:
            await conn.close()
            await self.putconn(conn)
            self._unserved()
            return None
        return conn

    def _unserved(self) -> None:
        """Say once (then only in debug) that a new listening connection found no server in time."""
        level, self._warned = (logging.DEBUG if self._warned else logging.WARNING), True
        log.log(
            level,
            "a new listening connection was not served within %s s (a session pooler with no server connection "
            "to spare? give it max_size + listen_max_size per process); parked claims without one poll",
            OPEN_S,
        )

    async def putconn(self, conn: AsyncListeningConnection) -> None:
        """Take ``conn`` back: kept for the next claim if it is open and the pool is, else closed and dropped."""
        with self._lock:
            keep = not conn.closed and not self._closed
            if keep:
                self._idle.append((conn, time.monotonic()))
            else:
                self._size -= 1
        if not keep:
            await conn.close()

    def _take_stale(self, now: float) -> list[AsyncListeningConnection]:
        """Remove (under the lock) the idle connections kept longer than ``_LISTEN_MAX_IDLE_S``."""
        stale = [conn for conn, since in self._idle if now - since > _LISTEN_MAX_IDLE_S]
        if stale:
            self._idle = [(conn, since) for conn, since in self._idle if now - since <= _LISTEN_MAX_IDLE_S]
            self._size -= len(stale)
        return stale

    async def close(self) -> None:
        """Close the idle connections; those lent out are closed as they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = [conn for conn, _ in self._idle], []
            self._size -= len(idle)
        await _close_all(idle)

    def get_stats(self) -> dict[str, int]:
        """``pool_size`` (connections open or opening) and ``pool_available`` (idle), as psycopg_pool names them."""
        with self._lock:
            return {"pool_size": self._size, "pool_available": len(self._idle), "pool_max": self._max_size}


async def _close_all(conns: list[AsyncListeningConnection]) -> None:
    for conn in conns:
        await conn.close()


async def _round_trip(conn: psycopg.AsyncConnection[Any], query: bytes, deadline: float) -> bool:
    """Run ``query`` (no parameters, no rows) on a new connection, no later than ``deadline``; whether it
    completed in time. A wait that runs out leaves the connection to be closed by its caller."""
    if ASYNC:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(conn.execute(query), left)
        except TimeoutError:
            return False
        return True
    return _libpq_round_trip(conn.pgconn, query, deadline)


if not ASYNC:

    def _libpq_round_trip(pgconn: PGconn, query: bytes, deadline: float) -> bool:
        """``_round_trip`` through libpq's own calls: never a thread stuck in the driver."""
        pgconn.send_query(query)
        while pgconn.flush():
            if not _ready(pgconn.socket, deadline, write=True):
                return False
        while True:
            pgconn.consume_input()
            if not pgconn.is_busy():
                break
            if not _ready(pgconn.socket, deadline, write=False):
                return False
        succeeded = True
        while (result := pgconn.get_result()) is not None:
            succeeded = succeeded and result.status == ExecStatus.COMMAND_OK
        return succeeded

    def _ready(sock: int, deadline: float, *, write: bool) -> bool:
        """Whether ``sock`` becomes readable (or writable) before ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        readable, writable, _ = select.select([] if write else [sock], [sock] if write else [], [], left)
        return bool(readable or writable)
