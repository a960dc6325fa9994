"""The dashboard's documented commands and ``create_app`` line (docs/dashboard.md, docs/operations.md) do what
their comments say: each command through the command line with uvicorn stubbed (no server starts)."""

from __future__ import annotations

import secrets
import shlex
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import alkstore
from alkstore.adapters.cli import EXIT_OK, URL_VARIABLE, build_parser, main
from alkstore.adapters.web import TOKEN_VARIABLE
from tests._docs import block
from tests.web.test_command import action_paths

#: The command blocks, by page and needle.
COMMANDS = (("docs/dashboard.md", "alkstore demo --web"), ("docs/operations.md", "(here: reading only)"))
#: The ``create_app`` blocks, the same on both pages.
CREATE_APP = (
    ("docs/dashboard.md", "dashboard = create_app(store, read_only=True)"),
    ("docs/operations.md", "dashboard = create_app(store, read_only=True)"),
)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``uvicorn.run`` was asked to serve, in place of serving it."""
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append({"app": app, **options}))
    return calls


def test_the_documented_commands_serve_as_their_comments_say(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # where the documented certificate and key lie
    (tmp_path / "cert.pem").write_text("a certificate\n")
    (tmp_path / "key.pem").write_text("its key\n")
    lines = [(page, line) for page, needle in COMMANDS for line in block(page, needle).splitlines()]
    assert len(lines) >= 8
    for page, line in lines:
        words = shlex.split(line, comments=True)
        environment = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
        args = [word for word in words if "=" not in word or word.startswith("-")]
        assert args[0] == "alkstore", line
        if args[1] == "demo":  # the demo serves its own store until Ctrl-C: tests/web/test_serve.py runs it
            assert build_parser().parse_args(args[1:]).web, line
            continue
        monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
        for name, value in environment.items():  # "..." stands for a secret of the reader's: a strong one
            monkeypatch.setenv(name, secrets.token_urlsafe(24) if value == "..." else value)
        if "--url" in args:  # the command opens its store before serving: the connection target is the test's
            args[args.index("--url") + 1] = "memory://"
        else:  # the URL from the environment, as every command may take it
            monkeypatch.setenv(URL_VARIABLE, "memory://")
        served.clear()

        assert main(args[1:]) == EXIT_OK, f"{page}: {line}"

        (call,) = served
        host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
        assert (call["host"], call["port"]) == (host, 8080), line
        if "http://127.0.0.1:8080/" in line:
            assert host == "127.0.0.1"
        assert (action_paths(call["app"]) == set()) == ("--read-only" in args), line


def test_the_documented_create_app_mounts_read_only() -> None:
    examples = [block(page, needle) for page, needle in CREATE_APP]
    assert examples[0] == examples[1]
    with alkstore.open("memory://") as store:
        store.queue("emails").enqueue({"to": "ada@example.com"})
        namespace: dict[str, Any] = {"store": store}
        exec(examples[0], namespace)
        dashboard = namespace["dashboard"]
        assert action_paths(dashboard) == set()
        app = Starlette(routes=[Mount("/alkstore", dashboard)])  # as its comment mounts it
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:  # a loopback name: an allowed host
            overview = client.get("/alkstore/")
            assert overview.status_code == 200
            assert "emails" in overview.text
            assert client.post("/alkstore/actions/pause/emails").status_code in (404, 405)
