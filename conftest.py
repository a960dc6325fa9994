"""Shared test fixtures: finding a PostgreSQL server, and a fresh schema per store.

The DSN comes from ``ALKSTORE_TEST_DSN``; else the local server at 127.0.0.1:5432 is tried;
else a testcontainers PostgreSQL (needs Docker); else the Postgres half is skipped, loudly.
Under ``CI=true`` an unreachable server is a failure, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_unavailable: list[str] = []


def _reachable(dsn: str) -> str | None:
    """None if a connection to ``dsn`` works, else the reason it does not."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN of a reachable PostgreSQL server, or a skip (a failure under CI=true)."""
    explicit = os.environ.get("ALKSTORE_TEST_DSN")
    reasons = []
    for dsn in [explicit] if explicit else [LOCAL_DSN]:
        reason = _reachable(dsn)
        if reason is None:
            yield dsn
            return
        reasons.append(f"{dsn}: {reason}")
    if not explicit:
        try:
            from testcontainers.postgres import PostgresContainer

            with PostgresContainer("postgres:16-alpine", driver=None) as container:
                yield container.get_connection_url()
                return
        except Exception as exc:
            reasons.append(f"testcontainers: {type(exc).__name__}: {exc}")
    message = "no PostgreSQL server for the Postgres tests: " + "; ".join(reasons)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: the Postgres tests must run)", pytrace=False)
    _unavailable.append(message)
    pytest.skip(message)


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, unique per call."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for message in dict.fromkeys(_unavailable):
        terminalreporter.write_sep("!", "POSTGRES TESTS SKIPPED", yellow=True, bold=True)
        terminalreporter.write_line(message)
