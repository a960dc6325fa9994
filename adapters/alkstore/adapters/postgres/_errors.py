"""Driver errors to alkstore errors: the one place the Postgres engine translates them (ADR 014).

``DatabaseUnavailable`` marks what a loop may retry: the connection was lost or could not be
made, the pool had none to lend in time, the server is shutting down or starting, too many
connections, or the transaction lost a serialization or deadlock conflict and was rolled back.
Everything else is a permanent ``DatabaseError`` (a missing table, a permission, a bug). Errors
that only a transaction pooler without ``prepare_threshold=None`` causes are ``PoolerMisconfigured``,
whose message says what to set, logged once per process (ADR 037).
"""

from __future__ import annotations

import logging
import re
from typing import NoReturn

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from alkstore.errors import DatabaseError, DatabaseUnavailable, PoolerMisconfigured, StoreClosed

__all__ = ["POOLER_FIX", "TRANSIENT_SQLSTATES", "is_pooler_symptom", "is_transient", "raise_translated", "translated"]

log = logging.getLogger("alkstore.postgres")

#: What the server says when psycopg's prepared statements (``_pg3_<n>``) meet a server connection
#: other than the one they were prepared on, by SQLSTATE: does not exist, already exists, and
#: another statement's parameters bound to one of ours.
_POOLER_SYMPTOMS = {
    "26000": re.compile(r'prepared statement "_pg3_\w+" does not exist'),
    "42P05": re.compile(r'prepared statement "_pg3_\w+" already exists'),
    "08P01": re.compile(r'bind message supplies \d+ parameters?, but prepared statement "_pg3_\w+" requires \d+'),
}
POOLER_FIX = (
    "the store seems to go through a transaction pooler (PgBouncer pool_mode = transaction) that does not"
    " follow prepared statements: open it with prepare_threshold=None, and with listen_url set to a"
    " direct or session-pooled URL for LISTEN (ADR 019)"
)
_told = False

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


def is_pooler_symptom(exc: psycopg.Error) -> bool:
    """Whether ``exc`` is one only a transaction pooler that loses prepared statements causes."""
    symptom = _POOLER_SYMPTOMS.get(exc.sqlstate or "")
    return symptom is not None and symptom.search(str(exc)) is not None


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
    if is_pooler_symptom(exc):
        _tell_once(message)
        return PoolerMisconfigured(f"{POOLER_FIX}; {message}")
    return DatabaseUnavailable(message) if is_transient(exc) else DatabaseError(message)


def _tell_once(message: str) -> None:
    """Log the pooler fix once per process; every later call still raises, without a log line."""
    global _told
    if not _told:
        _told = True
        log.error("%s (%s); further calls raise PoolerMisconfigured without logging it again", POOLER_FIX, message)


def raise_translated(exc: psycopg.Error) -> NoReturn:
    """Raise the alkstore error for a psycopg error, ``from`` it."""
    raise translated(exc) from exc
