"""Shared test fixtures: a PostgreSQL server for the Postgres tests, and a fresh schema per store.

The server is found by the Postgres adapter's testing module (``ALKSTORE_TEST_DSN``, else the
local server at 127.0.0.1:5432, else a testcontainers PostgreSQL); without one the Postgres
half is skipped, loudly. Under ``CI=true`` an unreachable server is a failure, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hatch_build import load_generator
from tests.support import under_ci

ROOT = Path(__file__).resolve().parent

_unavailable: list[str] = []


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """A DSN of a reachable PostgreSQL server, or a skip (a failure under CI=true)."""
    from alkstore.adapters.postgres.testing import find_server

    dsn, reason = find_server()
    if dsn is not None:
        return dsn
    if under_ci():
        pytest.fail(reason + " (CI=true: the Postgres tests must run)", pytrace=False)
    _unavailable.append(reason)
    pytest.skip(reason)


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    from alkstore.adapters.postgres.testing import drop_schema as drop

    drop(dsn, schema)


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, unique per call."""
    from alkstore.adapters.postgres.testing import unique_schema as unique

    return unique(prefix)


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name on the test server, dropped after the test."""
    schema = unique_schema()
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture(scope="module")
def pg_module_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name shared by one test module, dropped after it."""
    schema = unique_schema("m")
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture(scope="session")
def _pg_scratch_database(pg_dsn: str) -> Iterator[str]:
    """A database of the session's own on the test server (dropped at the end: a drop costs a checkpoint)."""
    import secrets

    import psycopg
    from psycopg import sql

    from tests.support import url_of

    name = f"alk_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield url_of(pg_dsn, database=name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def pg_database(_pg_scratch_database: str) -> Iterator[str]:
    """A database the test has to itself, alkstore's default schema free in it: its URL.

    Emptied after the test (every schema dropped, ``public`` made again), so the next test's ids
    start at 1 too. Its name is short, so a URL printed in 80 columns is printed whole.
    """
    import psycopg
    from psycopg import sql

    yield _pg_scratch_database
    with psycopg.connect(_pg_scratch_database, autocommit=True) as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'"
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.execute("CREATE SCHEMA public")


def report_unavailable(message: str) -> None:
    """Remember an engine or server that could not be tested, for the closing banner."""
    _unavailable.append(message)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test a tree whose committed sync twins are stale (ADR 059): regenerate them first.

    The twins are in the tree whatever the install (editable, or a wheel built from it), so the
    check reads the tree, never where the package was imported from.
    """
    behind = [path.relative_to(ROOT).as_posix() for path in load_generator(ROOT).stale(ROOT)]
    if behind:
        pytest.exit(f"the generated sync runtime is stale ({', '.join(behind)}): run python3 tools/async_to_sync.py", 2)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for message in dict.fromkeys(_unavailable):
        terminalreporter.write_sep("!", "POSTGRES TESTS SKIPPED", yellow=True, bold=True)
        terminalreporter.write_line(message)
