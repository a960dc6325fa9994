"""Where the backend's jobs are: a Django ``DATABASES`` entry as a PostgreSQL URL or as the ``sqlite:///`` URL of
its file, and a committed job's stored ``enqueued_at`` read back (ADR 064); whether a Django connection is in a
transaction, and the job id a result id names."""

from __future__ import annotations

from collections.abc import Mapping
from os.path import abspath
from typing import Any
from urllib.parse import quote

from alkstore import AsyncStore, JobInfo, JobResult, Store

__all__ = [
    "POSTGRES_ENGINE",
    "SQLITE_ENGINE",
    "astored_at",
    "database_url",
    "in_transaction",
    "job_id_of",
    "sqlite_file",
    "store_url",
    "stored_at",
]

#: The Django database engines whose connections alkstore can write on.
POSTGRES_ENGINE = "django.db.backends.postgresql"
SQLITE_ENGINE = "django.db.backends.sqlite3"

#: Entries of a database's ``OPTIONS`` that are Django's own, never libpq parameters.
_DJANGO_ONLY = frozenset({"isolation_level", "assume_role", "server_side_binding", "pool", "cursor_factory", "context"})


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """A ``postgresql://`` URL for a Django ``DATABASES`` entry: its NAME, USER, PASSWORD, HOST and PORT.

    Scalar libpq parameters of its ``OPTIONS`` (``sslmode``, ``connect_timeout``, …) go into the
    query string; Django's own entries (``isolation_level``, ``pool``, …) are left out.
    """
    user = quote(str(settings_dict.get("USER") or ""), safe="")
    password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
    host = str(settings_dict.get("HOST") or "")
    port = str(settings_dict.get("PORT") or "")
    name = quote(str(settings_dict.get("NAME") or ""), safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    if host.startswith("/"):  # a Unix socket directory goes into the query string
        location, query = (f":{port}" if port else ""), [f"host={quote(host, safe='')}"]
    else:
        location, query = (host + (f":{port}" if port else "")), []
    for key, value in sorted((settings_dict.get("OPTIONS") or {}).items()):
        if key not in _DJANGO_ONLY and isinstance(value, str | int) and not isinstance(value, bool):
            query.append(f"{quote(str(key), safe='')}={quote(str(value), safe='')}")
    return f"postgresql://{credentials}{location}/{name}" + (f"?{'&'.join(query)}" if query else "")


def sqlite_file(settings_dict: Mapping[str, Any]) -> str | None:
    """The file of a Django SQLite ``DATABASES`` entry (its NAME, made absolute), or ``None`` for one that names
    no file alkstore can open beside Django: in memory (``:memory:``, Django's own test database by default) or
    a ``file:`` URI."""
    name = str(settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    return abspath(name)


def store_url(settings_dict: Mapping[str, Any]) -> str:
    """The alkstore URL of a Django ``DATABASES`` entry: ``sqlite:///`` and its file on SQLite, else
    ``database_url``'s (the checks refuse any other engine, and a SQLite entry without a file, first)."""
    if settings_dict.get("ENGINE") == SQLITE_ENGINE:
        return "sqlite:///" + quote(sqlite_file(settings_dict) or "", safe="/")
    return database_url(settings_dict)


def stored_at(store: Store, job_id: int) -> Any:
    """The stored ``enqueued_at`` of a committed job: its row's, or its kept result's once it ran (else ``None``)."""
    found: JobInfo | JobResult | None = store.get_job(job_id) or store.result(job_id)
    return None if found is None else found.enqueued_at


async def astored_at(store: AsyncStore, job_id: int) -> Any:
    """``stored_at`` on an ``AsyncStore``."""
    found: JobInfo | JobResult | None = await store.get_job(job_id) or await store.result(job_id)
    return None if found is None else found.enqueued_at


def in_transaction(connection: Any) -> bool:
    """Whether a Django connection is in a transaction: an atomic block, or autocommit turned off."""
    return bool(connection.in_atomic_block or (connection.connection is not None and not connection.get_autocommit()))


def job_id_of(result_id: str) -> int:
    """The job id a ``TaskResult.id`` names (0, which no job has, for one that is not a number)."""
    text = str(result_id)
    return int(text) if text.isdigit() else 0
