"""The Postgres engine's connections: its two pools, and the one way a call borrows from them.

Every call takes one connection of the main pool in autocommit mode, runs its statement(s) and
gives it back; psycopg errors raised meanwhile are translated there, once. Claims parked in a
wait hold a connection of the listening pool (``_waiting``), which may point elsewhere (a
direct or session-pooled server when the main URL goes through a transaction pooler).
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.pq.abc import PGconn
from psycopg.rows import BaseRowFactory, RowFactory, tuple_row
from psycopg_pool import ConnectionPool

from ._errors import raise_translated
from ._options import EngineOptions
from ._sql import Statements

__all__ = ["Connections", "PooledConnection", "check_connection"]

_R = TypeVar("_R")
#: ``select.poll`` where the platform has it (the pools' check falls back to a round trip).
_POLL = getattr(select, "poll", None)


class PooledConnection(psycopg.Connection[tuple[Any, ...]]):
    """A connection of the engine's main pool, keeping a cursor per row shape for the engine's statements.

    ``Connection.execute`` builds a cursor (and its adaptation context) for every statement;
    the hot calls reuse one instead. The pool lends the connection to one thread at a time,
    so its cursors are never shared, and they go with it.
    """

    def __init__(self, pgconn: PGconn, row_factory: RowFactory[tuple[Any, ...]] = tuple_row) -> None:
        super().__init__(pgconn, row_factory)
        self._kept: dict[object, psycopg.Cursor[Any]] = {}

    def run(
        self,
        statement: str,
        params: Mapping[str, Any],
        row: BaseRowFactory[_R],
        *,
        binary: bool = False,
    ) -> psycopg.Cursor[_R]:
        """Execute ``statement`` on the kept cursor for ``row`` (text or binary results) and return it."""
        cursor = self._kept.get(row)
        if cursor is None or cursor.closed:
            cursor = self._kept[row] = self.cursor(row_factory=row)
        return cursor.execute(statement, params, binary=binary)


def check_connection(conn: psycopg.Connection[Any]) -> None:
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
    ConnectionPool.check_connection(conn)


class Connections:
    """The main pool and the listening pool of one engine, and how calls borrow from them."""

    def __init__(self, options: EngineOptions, sql: Statements) -> None:
        self._sql = sql
        kwargs = options.connect_kwargs
        self.pool: ConnectionPool[PooledConnection] = ConnectionPool(
            options.url,
            connection_class=PooledConnection,
            kwargs=kwargs,
            min_size=options.min_size,
            max_size=options.max_size,
            open=False,
            configure=self._configure,
            check=check_connection,
            timeout=options.pool_timeout,
            name=f"alkstore:{options.schema}",
            num_workers=2,
        )
        self.listen_pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            options.listen_url,
            kwargs=kwargs,
            min_size=0,
            max_size=options.listen_max_size,
            open=False,
            configure=self._configure,
            check=check_connection,
            timeout=options.pool_timeout,
            max_idle=60.0,
            name=f"alkstore:{options.schema}:listen",
            num_workers=1,
        )

    def open(self) -> None:
        self.pool.open(wait=False)
        self.listen_pool.open(wait=False)

    def close(self) -> None:
        self.listen_pool.close()
        self.pool.close()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(self._sql.use_utc, {})

    @contextmanager
    def connection(self) -> Iterator[PooledConnection]:
        """A pooled autocommit connection; psycopg errors inside become alkstore errors.

        ``getconn``/``putconn`` rather than ``pool.connection()``, whose exit also runs the
        connection's own ``with`` exit: a commit that autocommit makes a no-op, but not a free one.
        """
        conn = self._getconn()
        try:
            yield conn
        except psycopg.Error as exc:
            raise_translated(exc)
        finally:
            self.pool.putconn(conn)

    def _getconn(self) -> PooledConnection:
        try:
            return self.pool.getconn()
        except psycopg.Error as exc:
            raise_translated(exc)

    @contextmanager
    def transaction(self) -> Iterator[PooledConnection]:
        """A pooled connection inside a transaction of the engine's own (commit on exit, rollback on error)."""
        with self.connection() as conn:
            try:
                with conn.transaction():
                    yield conn
            except psycopg.Error as exc:
                raise_translated(exc)

    def one(
        self, statement: str, params: Mapping[str, Any], row: BaseRowFactory[_R], *, binary: bool = False
    ) -> _R | None:
        """Run one statement on a pooled connection; its first row, or ``None``."""
        return self._run(statement, params, row, binary, psycopg.Cursor.fetchone)  # type: ignore[no-any-return]

    def all(
        self, statement: str, params: Mapping[str, Any], row: BaseRowFactory[_R], *, binary: bool = False
    ) -> list[_R]:
        """Run one statement on a pooled connection; all its rows."""
        return self._run(statement, params, row, binary, psycopg.Cursor.fetchall)  # type: ignore[no-any-return]

    def _run(
        self,
        statement: str,
        params: Mapping[str, Any],
        row: BaseRowFactory[Any],
        binary: bool,
        fetch: Callable[[psycopg.Cursor[Any]], Any],
    ) -> Any:
        """The hot calls' form of ``connection()``: the same checkout and translation, inline."""
        conn = self._getconn()
        try:
            return fetch(conn.run(statement, params, row, binary=binary))
        except psycopg.Error as exc:
            raise_translated(exc)
        finally:
            self.pool.putconn(conn)
