"""Migrating a schema: every missing version applied in order, under an advisory lock (ADR 010, 019).

``apply`` runs every missing version in one transaction that holds a per-schema advisory lock, so
concurrent migrators serialise and the late ones find nothing left to do; ``check`` compares the
stored version with this code's (``_migrations``). A table the pending migrations lock against writes
and later exclusively is locked exclusively first (``exclusive_first``), so running workers' statements
never wait behind a lock the migration then raises; should the server still break a deadlock by
rolling the migration back, the whole transaction is tried again (nothing of it stayed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import errors, sql

from alkstore.engine import wall_sleep_async

from ._migrations import (
    Migration,
    current_version,
    exclusive_first,
    lock_key,
    migrations,
    out_of_date,
    refuse_newer,
)
from ._sql import Statements, grants, lock_exclusive

__all__ = ["DEADLOCK_TRIES", "Migration", "apply", "check", "current_version", "migrations", "stored_version"]

log = logging.getLogger("alkstore.postgres")

#: How many times a migration rolled back to break a deadlock is run (a second apart, then two, …).
DEADLOCK_TRIES = 5


async def stored_version(conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str) -> int:
    """The version recorded in ``schema`` (0 when it holds no alkstore version table)."""
    row = await (await conn.execute(statements.version_table_exists, {"schema": schema})).fetchone()
    if row is None or not row[0]:
        return 0
    row = await (await conn.execute(statements.schema_version, {})).fetchone()
    return 0 if row is None else int(row[0])


async def apply(
    conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str, grant: Sequence[str] = ()
) -> list[int]:
    """Bring ``schema`` to the current version; return the versions applied (none if up to date).

    An up-to-date schema is only read, so a role without DDL rights may call this: the
    privileges PostgreSQL checks before ``IF NOT EXISTS`` are needed only when something is
    missing. Otherwise, in the same transaction, every application role of the schema (the
    roles in ``grant``, and those already granted what one needs) is granted what it needs on
    everything the schema holds now, so grants survive upgrades (ADR 019).
    """
    for attempt in range(1, DEADLOCK_TRIES + 1):
        try:
            return await _apply_once(conn, statements, schema, grant)
        except errors.DeadlockDetected as exc:
            if attempt == DEADLOCK_TRIES:
                raise
            log.warning(
                "migrating schema %r met a deadlock with running work (%s); rolled back, trying again (%d of %d)",
                schema,
                str(exc).splitlines()[0],
                attempt + 1,
                DEADLOCK_TRIES,
            )
            await wall_sleep_async(attempt)
    raise AssertionError("unreachable")


async def _apply_once(
    conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str, grant: Sequence[str]
) -> list[int]:
    """One try of ``apply``: one transaction, all of it or nothing."""
    have = await stored_version(conn, statements, schema)
    refuse_newer(have, schema)
    if have == current_version() and not grant:
        return []
    applied = []
    async with conn.transaction():
        await conn.execute(statements.migration_lock, {"key": lock_key(schema)})
        roles = await _application_roles(conn, statements, schema)  # before a migration could replace a table
        if have != current_version():
            await conn.execute(statements.create_schema, {})
            await conn.execute(statements.create_version_table, {})
            have = await stored_version(conn, statements, schema)  # another migrator may have finished meanwhile
            refuse_newer(have, schema)
            await conn.execute(statements.use_schema, {})
            pending = [migration for migration in migrations() if migration.version > have]
            for table in exclusive_first(pending):  # taken first, never raised midway: no deadlock with workers
                await conn.execute(lock_exclusive(schema, table), {})
            for migration in pending:
                await conn.execute(sql.SQL(migration.text))
                await conn.execute(statements.record_version, {"version": migration.version, "name": migration.name})
                applied.append(migration.version)
        await _grant(conn, statements, schema, dict.fromkeys([*roles, *grant]))
    return applied


async def _application_roles(conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str) -> list[str]:
    """The roles already granted what an application role needs on ``schema`` (they may write its jobs)."""
    cursor = await conn.execute(statements.application_roles, {"schema": schema})
    return [str(row[0]) for row in await cursor.fetchall()]


async def _grant(conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str, roles: Iterable[str]) -> None:
    """Grant each of ``roles`` what an application role needs on everything ``schema`` holds now."""
    tables = [str(row[0]) for row in await (await conn.execute(statements.data_tables, {"schema": schema})).fetchall()]
    for role in roles:
        for statement in grants(schema, role, tables):
            await conn.execute(statement, {})


async def check(conn: psycopg.AsyncConnection[Any], statements: Statements, schema: str, url: str) -> None:
    """Raise ``SchemaOutOfDate`` (naming the command to run) unless ``schema`` is current."""
    error = out_of_date(await stored_version(conn, statements, schema), schema, url)
    if error is not None:
        raise error
