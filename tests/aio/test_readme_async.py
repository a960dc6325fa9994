"""The README's async example runs as written: the Starlette app under uvicorn writes an order, its webhook
message and a receipt task in one ``AsyncSession`` (a refused order leaves none of them), and
``alkstore worker`` runs the ``async def`` task and delivers the webhook through the app's courier."""

from __future__ import annotations

import json
import signal
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore.adapters.postgres.testing import drop_schema, unique_schema
from tests._proc import ALKSTORE, LiveProcess
from tests.cli.test_readme import block_with, code_blocks

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

README_URL = "postgresql://postgres@127.0.0.1:5432/test"
UVICORN = str(Path(sys.executable).with_name("uvicorn"))
CURL = "curl -X POST http://127.0.0.1:8000/orders -H 'content-type: application/json' -d '{\"order\": 1}'"


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, empty schema: the app creates its ``orders`` table there as it starts, as the README says."""
    name = unique_schema("readme")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    drop_schema(pg_dsn, name)


@pytest.fixture
def app_dir(pg_dsn: str, schema: str, tmp_path: Path) -> Path:
    """A directory holding the README's ``myapp/web.py``, on the test server and schema."""
    example = block_with("# myapp/web.py")
    edits = {
        f'"{README_URL}"': repr(pg_dsn),
        "migrate=True)": f"migrate=True, schema={schema!r})",
        "INSERT INTO orders": f"INSERT INTO {schema}.orders",
        "CREATE TABLE IF NOT EXISTS orders": f"CREATE TABLE IF NOT EXISTS {schema}.orders",
    }
    for needle, replacement in edits.items():
        assert needle in example, needle
        example = example.replace(needle, replacement)
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "web.py").write_text(example)
    return tmp_path


def commands() -> list[str]:
    """The README's block of commands that starts the app and its worker and places an order, line by line."""
    (block,) = [body for info, body in code_blocks() if info == "sh" and "uvicorn myapp.web:app" in body]
    return block.splitlines()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def post_order(port: int, order: int) -> tuple[int, object]:
    """What the README's ``curl`` does, for ``order``: the status and the JSON answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/orders",
        data=json.dumps({"order": order}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_the_app_and_its_worker_run_as_the_readme_says_and_the_webhook_is_delivered(
    pg_dsn: str, schema: str, app_dir: Path
) -> None:
    serve, work, curl = commands()
    assert serve == "uvicorn myapp.web:app --port 8000"
    assert work == f"alkstore worker --app myapp.web:tasks --url {README_URL}"
    assert curl == CURL
    port = free_port()
    serve_args = serve.split()[1:]
    serve_args[serve_args.index("--port") + 1] = str(port)
    work_args = work.split()[1:]
    work_args[work_args.index("--url") + 1] = pg_dsn

    with LiveProcess([UVICORN, *serve_args], cwd=app_dir) as app:
        # Listening, not only started: uvicorn binds its port after the app's startup, and says so.
        app.wait_for(lambda _stream, line: "Uvicorn running on" in line, timeout=60)
        with LiveProcess([ALKSTORE, *work_args, "--schema", schema], cwd=app_dir) as worker:
            assert post_order(port, 1) == (201, {"created": 1})
            assert post_order(port, -2) == (422, {"refused": -2})
            printed = ("receipt for order 1", "webhook order.created for order 1")
            worker.wait_for(lambda _stream, _line: all(text in "".join(worker.stdout) for text in printed), timeout=60)
            worker.proc.send_signal(signal.SIGTERM)
            assert worker.finish(timeout=60) == 0, "".join(worker.stderr)
        app.proc.send_signal(signal.SIGINT)
        assert app.finish(timeout=60) == 0, "".join(app.stderr)

    assert "order -2" not in "".join(worker.stdout)
    assert "stopped: 2 processed (2 ok, 0 retried, 0 dead)" in "".join(worker.stderr)
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT id FROM {}.orders ORDER BY id").format(sql.Identifier(schema))
        assert [row[0] for row in conn.execute(query)] == [1]
    with alkstore.open(pg_dsn, schema=schema, max_size=2) as store:
        assert store.jobs("receipts").jobs == ()
        assert store.jobs(store.outbox("webhooks").queue).jobs == ()
