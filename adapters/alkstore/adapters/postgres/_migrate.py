"""Versioned migrations: the SQL files in ``migrations/``, applied in order under an advisory lock.

Each file ``NNNN_name.sql`` is one schema version. ``apply`` runs every missing version in one
transaction that holds a per-schema advisory lock, so concurrent migrators serialise and the
late ones find nothing left to do; ``check`` compares the stored version with this code's.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from alkstore._urls import redact
from alkstore.errors import DatabaseError, SchemaOutOfDate

from ._sql import Statements, grants

__all__ = ["Migration", "apply", "check", "current_version", "migrations", "stored_version"]

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, its name and its SQL."""

    version: int
    name: str
    text: str


@cache
def migrations() -> tuple[Migration, ...]:
    """The packaged migrations in version order; their numbers run 1, 2, … without a gap."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        match = _FILE.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"alkstore's migrations are not numbered 1..n: {versions}")
    return tuple(found)


def current_version() -> int:
    """The schema version this code needs."""
    return migrations()[-1].version


def _lock_key(schema: str) -> int:
    """The advisory lock key that serialises migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.sha256(f"alkstore migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def stored_version(conn: psycopg.Connection[Any], statements: Statements, schema: str) -> int:
    """The version recorded in ``schema`` (0 when it holds no alkstore version table)."""
    row = conn.execute(statements.version_table_exists, {"schema": schema}).fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute(statements.schema_version, {}).fetchone()
    return 0 if row is None else int(row[0])


def apply(conn: psycopg.Connection[Any], statements: Statements, schema: str, grant: Sequence[str] = ()) -> list[int]:
    """Bring ``schema`` to the current version; return the versions applied (none if up to date).

    An up-to-date schema is only read, so a role without DDL rights may call this: the
    privileges PostgreSQL checks before ``IF NOT EXISTS`` are needed only when something is
    missing. Otherwise, in the same transaction, every application role of the schema (the
    roles in ``grant``, and those already granted what one needs) is granted what it needs on
    everything the schema holds now, so grants survive upgrades (ADR 019).
    """
    have = stored_version(conn, statements, schema)
    _refuse_newer(have, schema)
    if have == current_version() and not grant:
        return []
    applied = []
    with conn.transaction():
        conn.execute(statements.migration_lock, {"key": _lock_key(schema)})
        roles = _application_roles(conn, statements, schema)  # before a migration could replace a table
        if have != current_version():
            conn.execute(statements.create_schema, {})
            conn.execute(statements.create_version_table, {})
            have = stored_version(conn, statements, schema)  # another migrator may have finished meanwhile
            _refuse_newer(have, schema)
            conn.execute(statements.use_schema, {})
            for migration in migrations():
                if migration.version <= have:
                    continue
                conn.execute(sql.SQL(migration.text))
                conn.execute(statements.record_version, {"version": migration.version, "name": migration.name})
                applied.append(migration.version)
        _grant(conn, statements, schema, dict.fromkeys([*roles, *grant]))
    return applied


def _application_roles(conn: psycopg.Connection[Any], statements: Statements, schema: str) -> list[str]:
    """The roles already granted what an application role needs on ``schema`` (they may write its jobs)."""
    return [str(row[0]) for row in conn.execute(statements.application_roles, {"schema": schema}).fetchall()]


def _grant(conn: psycopg.Connection[Any], statements: Statements, schema: str, roles: Iterable[str]) -> None:
    """Grant each of ``roles`` what an application role needs on everything ``schema`` holds now."""
    tables = [str(row[0]) for row in conn.execute(statements.data_tables, {"schema": schema}).fetchall()]
    for role in roles:
        for statement in grants(schema, role, tables):
            conn.execute(statement, {})


def check(conn: psycopg.Connection[Any], statements: Statements, schema: str, url: str) -> None:
    """Raise ``SchemaOutOfDate`` (naming the command to run) unless ``schema`` is current."""
    have = stored_version(conn, statements, schema)
    want = current_version()
    _refuse_newer(have, schema)
    if have == want:
        return
    state = "has not been migrated" if have == 0 else f"is at version {have}"
    command = f"alkstore migrate --url {shlex.quote(redact(url))} --schema {shlex.quote(schema)}"
    raise SchemaOutOfDate(
        f"schema {schema!r} {state}, and this alkstore needs version {want}. Run `{command}`, "
        "or open with `alkstore.open(url, migrate=True)` (which calls `store.migrate()`)."
    )


def _refuse_newer(have: int, schema: str) -> None:
    want = current_version()
    if have > want:
        raise DatabaseError(
            f"schema {schema!r} is at version {have}, newer than this alkstore knows (version {want}); "
            "upgrade alkstore before using this database"
        )
