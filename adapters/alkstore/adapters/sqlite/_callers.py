"""The caller's own ``sqlite3`` connection for an enqueue in their transaction: theirs as given, or the driver
connection under a SQLAlchemy ``Connection`` or ``Session`` (ADR 063)."""

from __future__ import annotations

import sqlite3
from typing import Any

from alkstore.errors import InvalidTransaction

__all__ = ["caller_connection"]

_EXPECTED = (
    "a transaction of this store's transaction(), the caller's sqlite3.Connection to its file,"
    " or a SQLAlchemy Connection or Session on it"
)


def caller_connection(tx: Any) -> sqlite3.Connection:
    """The ``sqlite3.Connection`` to write on for the caller's ``tx``: itself, or the driver connection of a
    SQLAlchemy ``Connection``/``Session``/``scoped_session`` (its transaction begun). SQLAlchemy is recognised by
    its classes' module and name, never imported here."""
    if isinstance(tx, sqlite3.Connection):
        return tx
    if not type(tx).__module__.startswith("sqlalchemy."):
        raise InvalidTransaction(f"expected {_EXPECTED}, not {type(tx).__name__}")
    kind = type(tx).__name__
    if _is_a(tx, "sqlalchemy.orm.scoping", "scoped_session"):
        tx = tx()
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
    if not isinstance(driver, sqlite3.Connection):
        raise InvalidTransaction(f"the SQLAlchemy {kind} is not on sqlite3 (sqlite://), but on {type(driver).__name__}")
    return driver


def _is_a(value: object, module: str, name: str) -> bool:
    return any(cls.__module__ == module and cls.__name__ == name for cls in type(value).__mro__)
