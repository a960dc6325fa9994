"""The README's async example runs as written: a Starlette endpoint writing an order, its webhook message
and a receipt task in one ``AsyncSession``, a rollback that leaves none of them, and the ``async def``
task run by ``alkstore worker``."""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from starlette.testclient import TestClient

import alkstore
from alkstore.adapters.postgres.testing import drop_schema, unique_schema
from tests._proc import ALKSTORE, LiveProcess
from tests.cli.test_readme import block_with

pytestmark = pytest.mark.postgres

README_URL = '"postgresql://postgres@127.0.0.1:5432/test"'


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    name = unique_schema("readme")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id integer PRIMARY KEY)").format(sql.Identifier(name)))
    yield name
    drop_schema(pg_dsn, name)


@pytest.fixture
def web(pg_dsn: str, schema: str, tmp_path: Path) -> Iterator[Any]:
    """The README's ``myapp/web.py``, on the test server and schema, imported from ``tmp_path``."""
    example = block_with("# myapp/web.py")
    for needle in (README_URL, "migrate=True)", "INSERT INTO orders"):
        assert needle in example, needle
    example = (
        example.replace(README_URL, repr(pg_dsn))
        .replace("migrate=True)", f"migrate=True, schema={schema!r})")
        .replace("INSERT INTO orders", f"INSERT INTO {schema}.orders")
    )
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "web.py").write_text(example)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("myapp.web")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name == "myapp" or name.startswith("myapp.")]:
            del sys.modules[name]


def test_the_endpoint_commits_the_order_its_message_and_its_receipt_or_none_of_them(
    pg_dsn: str, schema: str, web: Any, tmp_path: Path
) -> None:
    with TestClient(web.app) as client:
        created = client.post("/orders", json={"order": 1})
        refused = client.post("/orders", json={"order": -2})
    assert (created.status_code, created.json()) == (201, {"created": 1})
    assert (refused.status_code, refused.json()) == (422, {"refused": -2})
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT id FROM {}.orders ORDER BY id").format(sql.Identifier(schema))
        assert [row[0] for row in conn.execute(query)] == [1]
    with alkstore.open(pg_dsn, schema=schema, max_size=2) as store:
        delivered: list[object] = []
        while store.outbox("webhooks").run_once("check", lambda payload, job: delivered.append(payload)):
            pass
        assert delivered == [{"event": "order.created", "order": 1}]
        (receipt,) = store.jobs("receipts").jobs
        assert (receipt.task, receipt.payload) == ("myapp.web:send_receipt", {"order": 1})

    (command,) = [line for line in block_with_commands() if "myapp.web:tasks" in line]
    args = command.split()[1:]
    args[args.index("--url") + 1] = pg_dsn
    with LiveProcess([ALKSTORE, *args, "--schema", schema], cwd=tmp_path) as worker:
        worker.wait_for(lambda _stream, line: "receipt for order 1" in line, timeout=60)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=60) == 0
    with alkstore.open(pg_dsn, schema=schema, max_size=2) as store:
        assert store.jobs("receipts").jobs == ()


def block_with_commands() -> list[str]:
    """The README's inline ``alkstore …`` commands (in backticks), one per line."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    return [part for part in text.replace("\n", " ").split("`") if part.startswith("alkstore worker")]
