"""Driver errors to alkstore errors: the one place the Postgres engine translates them (ADR 014).

``DatabaseUnavailable`` marks what a loop may retry: the connection was lost or could not be
made, the pool had none to lend in time, the server is shutting down or starting, too many
connections, or the transaction lost a serialization or deadlock conflict and was rolled back.
Everything else is a permanent ``DatabaseError`` (a missing table, a permission, a bug).
"""

from __future__ import annotations

from typing import NoReturn

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from alkstore.errors import DatabaseError, DatabaseUnavailable, StoreClosed

__all__ = ["TRANSIENT_SQLSTATES", "is_transient", "raise_translated", "translated"]

#: SQLSTATEs after which the same call may succeed later.
TRANSIENT_SQLSTATES = frozenset(
    {
        "08000",  # connection_exception
        "08001",  # sqlclient_unable_to_establish_sqlconnection
        "08003",  # connection_does_not_exist
        "08004",  # sqlserver_rejected_establishment_of_sqlconnection
        "08006",  # connection_failure
        "08P01",  # protocol_violation (a pooler dropping the session)
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "53300",  # too_many_connections
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now
        "57P05",  # idle_session_timeout
    }
)


def is_transient(exc: psycopg.Error) -> bool:
    """Whether a later retry of the failed call may succeed."""
    if isinstance(exc, PoolTimeout):
        return True
    if exc.sqlstate is not None:
        return exc.sqlstate in TRANSIENT_SQLSTATES
    # No SQLSTATE: the client lost the connection (or never had it), not the server refusing.
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def translated(exc: psycopg.Error) -> StoreClosed | DatabaseError:
    """The alkstore error for a psycopg error (raise it ``from`` the original)."""
    if isinstance(exc, PoolClosed):
        return StoreClosed("this store is closed")
    code = f" [{exc.sqlstate}]" if exc.sqlstate else ""
    message = f"PostgreSQL error{code}: {type(exc).__name__}: {exc}".rstrip(": ")
    return DatabaseUnavailable(message) if is_transient(exc) else DatabaseError(message)


def raise_translated(exc: psycopg.Error) -> NoReturn:
    """Raise the alkstore error for a psycopg error, ``from`` it."""
    raise translated(exc) from exc
