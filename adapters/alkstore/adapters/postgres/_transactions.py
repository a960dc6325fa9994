# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_transactions_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The caller's transaction: what ``enqueue(…, tx=…)`` accepts, and what it refuses (ADR 019).

Accepted by the async runtime: a ``psycopg.AsyncConnection`` inside a transaction or about to
begin one (not in autocommit), and a SQLAlchemy ``AsyncSession`` (or ``async_scoped_session``)
or ``AsyncConnection`` on the psycopg dialect; by the sync runtime, the same in their sync kinds:
``psycopg.Connection``, a SQLAlchemy ``Session``, ``scoped_session`` or ``Connection``. A
SQLAlchemy transaction is begun first if it has not been (so that its commit is the one that
publishes the job). SQLAlchemy is recognised by its classes' module and name, never imported here.

Refused with ``InvalidTransaction``, before anything is written: anything else, a closed
connection, and an autocommit connection outside a transaction, where the job would commit on
its own, at once, instead of with the caller's data.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from alkstore.errors import InvalidTransaction

__all__ = ["caller_connection"]

_EXPECTED = "the caller's psycopg.Connection (or a SQLAlchemy Connection or Session on psycopg)"


def caller_connection(tx: Any) -> psycopg.Connection[Any]:
    """The psycopg connection to write on for ``tx``, checked to be in (or about to begin) a transaction."""
    conn = _psycopg_connection(tx)
    if conn.closed:
        raise InvalidTransaction("the caller's connection is closed; nothing was enqueued")
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        raise InvalidTransaction(
            "the connection is in autocommit mode outside a transaction, so the job would commit on its own "
            "rather than with your data; open one (with conn.transaction(): …) or use store.transaction()"
        )
    return conn


def _psycopg_connection(tx: Any) -> psycopg.Connection[Any]:
    if isinstance(tx, psycopg.Connection):
        return tx
    module = type(tx).__module__
    if module.startswith("sqlalchemy."):
        return _from_sqlalchemy(tx)
    raise InvalidTransaction(f"expected {_EXPECTED}, not {type(tx).__name__}")


def _from_sqlalchemy(tx: Any) -> psycopg.Connection[Any]:
    """The driver connection of a SQLAlchemy session or connection, its transaction begun."""
    kind = type(tx).__name__
    if _is_a(tx, "sqlalchemy.orm.scoping", "scoped_session"):
        tx = tx()  # the thread's (or scope's) Session
    if _is_a(tx, "sqlalchemy.orm.session", "Session"):
        connection = tx.connection()  # begins the session's transaction if it has none
    elif _is_a(tx, "sqlalchemy.engine.base", "Connection"):
        connection = tx
        if connection.closed:
            raise InvalidTransaction("the caller's SQLAlchemy Connection is closed; nothing was enqueued")
        if not connection.in_transaction():
            connection.begin()
    else:
        raise InvalidTransaction(f"expected {_EXPECTED}, not the SQLAlchemy {kind}")
    driver = connection.connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise InvalidTransaction(
            f"the SQLAlchemy {kind} is not on the psycopg driver (postgresql+psycopg://), "
            f"but on {type(driver).__name__}"
        )
    return driver


def _is_a(value: object, module: str, name: str) -> bool:
    """Whether ``value`` is an instance of the class ``module.name`` (or a subclass), without importing it."""
    return any(cls.__module__ == module and cls.__name__ == name for cls in type(value).__mro__)
