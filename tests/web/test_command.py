"""``alkstore web``: where it may listen, and what it serves (uvicorn stubbed: no server starts)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import alkstore
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, URL_VARIABLE, main
from alkstore.adapters.web import TOKEN_VARIABLE, bind_refusal, is_loopback
from alkstore.adapters.web._security import MIN_TOKEN_LENGTH, READ_TOKEN_VARIABLE
from tests._proc import ALKSTORE, run


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``uvicorn.run`` was asked to serve, in place of serving it."""
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append({"app": app, **options}))
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    return calls


def action_paths(app: Any) -> set[str]:
    return {route.path for route in app.routes if isinstance(route, Route) and "POST" in (route.methods or ())}


def test_it_listens_on_loopback_port_8080_by_default(served: list[dict[str, Any]]) -> None:
    assert main(["web", "--url", "memory://"]) == EXIT_OK
    (call,) = served
    assert (call["host"], call["port"]) == ("127.0.0.1", 8080)
    assert action_paths(call["app"]) == {
        "/jobs/{job_id:int}/requeue",
        "/actions/requeue-dead/{queue:path}",
        "/actions/purge-dead/{queue:path}",
        "/actions/dead",
        "/actions/dead-group",
        "/actions/filter",
        "/actions/pause/{queue:path}",
        "/actions/resume/{queue:path}",
        "/actions/settings/{queue:path}",
        "/jobs/{job_id:int}/cancel",
        "/jobs/{job_id:int}/skip-step",
        "/actions/schedules",
        "/actions/unschedule/{schedule:path}",
        "/actions/fire/{schedule:path}",
    }


def test_it_serves_its_overview_over_a_sqlite_file(served: list[dict[str, Any]], tmp_path: Path) -> None:
    """``alkstore web --url sqlite:///…``: the app the command serves opens the file and shows its queues."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with alkstore.open(url) as store:
        store.queue("mail").enqueue("hello")
    assert main(["web", "--url", url]) == EXIT_OK
    (call,) = served
    with TestClient(call["app"], base_url="http://127.0.0.1:8080") as client:  # the lifespan opens the store
        page = client.get("/")
    assert page.status_code == 200
    assert "mail" in page.text


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "dashboard.example.com"])
def test_it_refuses_an_address_beyond_loopback_without_a_token_or_insecure(
    host: str, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--url", "memory://", "--host", host]) == EXIT_USAGE
    assert served == []
    err = capsys.readouterr().err
    assert f"refusing to listen on {host}" in err
    assert TOKEN_VARIABLE in err
    assert "--insecure" in err


def test_a_token_in_the_environment_lets_it_listen_beyond_loopback_behind_auth(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, "s3cret-of-sixteen+")
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0", "--port", "9000"]) == EXIT_OK
    (call,) = served
    assert (call["host"], call["port"]) == ("0.0.0.0", 9000)
    assert [m.kwargs["token"] for m in call["app"].user_middleware] == ["s3cret-of-sixteen+"]


def test_insecure_and_read_only_lets_it_listen_beyond_loopback_without_auth(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0", "--insecure", "--read-only"]) == EXIT_OK
    (call,) = served
    assert call["host"] == "0.0.0.0"
    assert [m.kwargs["token"] for m in call["app"].user_middleware] == [None]
    assert call["app"].state.dashboard.warning is None  # anyone may read, as asked: nobody may act
    assert "WARNING" not in capsys.readouterr().err


def test_insecure_with_actions_needs_a_second_flag_and_then_warns_at_start_and_on_every_page(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0", "--insecure"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "refusing to let anyone who can reach 0.0.0.0 requeue, purge" in err
    assert "--read-only" in err
    assert "--insecure-actions" in err
    assert served == []
    assert main(["web", "--url", "memory://", "--insecure-actions"]) == EXIT_USAGE
    assert "--insecure-actions goes with --insecure" in capsys.readouterr().err
    args = ["web", "--url", "memory://", "--host", "0.0.0.0", "--port", "9002", "--insecure", "--insecure-actions"]
    assert main(args) == EXIT_OK
    (call,) = served
    warning = call["app"].state.dashboard.warning
    assert warning.startswith("No authentication: anyone who can reach 0.0.0.0:9002 can requeue, purge")
    assert f"alkstore: WARNING: {warning}" in capsys.readouterr().err
    assert action_paths(call["app"])  # the actions are served, as asked twice


def test_it_answers_to_loopback_names_on_its_port_and_to_each_allowed_host(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--url", "memory://", "--port", "9001"]) == EXIT_OK
    assert served[0]["app"].state.allowed_hosts.names() == ["127.0.0.1:9001", "localhost:9001", "[::1]:9001"]
    args = ["web", "--url", "memory://", "--allowed-host", "dash.example.com", "--allowed-host", "10.0.0.5:8443"]
    assert main(args) == EXIT_OK
    hosts = served[1]["app"].state.allowed_hosts
    assert hosts.names()[-2:] == ["dash.example.com", "10.0.0.5:8443"]
    assert "dash.example.com, 10.0.0.5:8443" in capsys.readouterr().err
    assert main(["web", "--url", "memory://", "--allowed-host", "dash.example.com:http"]) == EXIT_USAGE
    assert "not a port" in capsys.readouterr().err
    assert len(served) == 2


def test_read_only_serves_an_app_without_action_routes(served: list[dict[str, Any]]) -> None:
    assert main(["web", "--url", "memory://", "--read-only"]) == EXIT_OK
    (call,) = served
    assert action_paths(call["app"]) == set()


def test_it_needs_a_url_and_a_valid_port(served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web"]) == EXIT_USAGE
    assert "--url" in capsys.readouterr().err
    assert main(["web", "--url", "memory://", "--port", "70000"]) == EXIT_USAGE
    assert served == []


def test_the_command_line_lists_web_among_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == EXIT_OK
    assert "serve the web dashboard" in capsys.readouterr().out


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_addresses_need_no_auth(host: str) -> None:
    assert is_loopback(host)
    assert bind_refusal(host, token=None, insecure=False) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com", "127.0.0.1.example.com"])
def test_other_addresses_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
    assert bind_refusal(host, token=None, insecure=False) is not None
    assert bind_refusal(host, token="a-token-of-enough-characters", insecure=False) is None
    assert bind_refusal(host, token="t", insecure=False) is not None
    assert bind_refusal(host, token=None, insecure=True, read_only=True) is None
    assert bind_refusal(host, token=None, insecure=True, insecure_actions=True) is None
    assert bind_refusal(host, token=None, insecure=True) is not None


_WITHOUT_THE_EXTRA = """
import sys

class BlockWeb:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"starlette", "jinja2", "uvicorn"}:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, BlockWeb())
from alkstore.adapters.cli import main
print("help", main(["--help"]))
print("web", main(["web", "--url", "memory://"]))
"""


def test_without_the_web_extra_the_command_line_works_and_web_says_what_to_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_EXTRA], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "serve the web dashboard" in result.stdout
    assert "help 0" in result.stdout
    assert "web 1" in result.stdout
    assert "pip install 'alkstore[web]'" in result.stderr


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port held by a socket that never listens: a connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], *named: str) -> None:
    """The command exited 1 with one ``alkstore: …`` line naming ``named``, and never said it was serving."""
    assert result.returncode == EXIT_ERROR, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("alkstore: ")
    for text in named:
        assert text in line
    assert "serving" not in line


def test_web_on_an_unreachable_server_exits_1_in_one_line_before_serving(closed_port: int) -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port}/test"
    result = run([ALKSTORE, "web", "--url", url, "--port", "0"], timeout=60)
    assert_refused_in_one_line(result, f"port {closed_port}", "Connection refused")


@pytest.mark.postgres
def test_web_on_an_unmigrated_schema_exits_1_in_one_line_naming_the_migrate_command(
    pg_dsn: str, pg_schema: str
) -> None:
    result = run([ALKSTORE, "web", "--url", pg_dsn, "--schema", pg_schema, "--port", "0"], timeout=60)
    assert_refused_in_one_line(result, "has not been migrated", "alkstore migrate --url ", f"--schema {pg_schema}")


def test_web_exits_1_when_the_app_fails_to_start_after_the_store_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvicorn

    def fail_to_start(app: Any, **options: Any) -> None:
        raise SystemExit(3)  # what uvicorn does when the app's lifespan startup fails

    monkeypatch.setattr(uvicorn, "run", fail_to_start)
    assert main(["web", "--url", "memory://"]) == EXIT_ERROR


@pytest.mark.parametrize(
    "token", ["x", "s3cret", "fifteen-chars-x", "aaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababab"]
)
def test_a_weak_token_cannot_guard_an_address_beyond_loopback(
    token: str, served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0"]) == EXIT_USAGE
    assert served == []
    err = capsys.readouterr().err
    assert "behind a weak token" in err
    assert f"at least {MIN_TOKEN_LENGTH}" in err
    assert len(token) < 6 or token not in err  # the message never repeats the token
    assert main(["web", "--url", "memory://"]) == EXIT_OK  # on loopback, the machine's own users, it serves


@pytest.mark.parametrize(
    ("token", "reader", "host", "said"),
    [
        (None, "a-reader-of-sixteen+", "127.0.0.1", "goes beside"),
        ("s3cret-of-sixteen+", "s3cret-of-sixteen+", "127.0.0.1", "differs from it"),
        ("s3cret-of-sixteen+", "weak", "0.0.0.0", "behind a weak token"),
    ],
)
def test_a_read_token_goes_beside_a_different_full_token_as_strong_as_it(
    token: str | None,
    reader: str,
    host: str,
    said: str,
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if token is not None:
        monkeypatch.setenv(TOKEN_VARIABLE, token)
    monkeypatch.setenv(READ_TOKEN_VARIABLE, reader)
    assert main(["web", "--url", "memory://", "--host", host]) == EXIT_USAGE
    assert served == []
    err = capsys.readouterr().err
    assert said in err
    assert READ_TOKEN_VARIABLE in err
    monkeypatch.setenv(TOKEN_VARIABLE, "s3cret-of-sixteen+")
    monkeypatch.setenv(READ_TOKEN_VARIABLE, "a-reader-of-sixteen+")
    assert main(["web", "--url", "memory://", "--host", host]) == EXIT_OK
    (call,) = served
    assert [m.kwargs["read_token"] for m in call["app"].user_middleware] == ["a-reader-of-sixteen+"]


def test_a_random_token_of_sixteen_characters_guards_any_address(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, secrets.token_urlsafe(12))  # 16 characters
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0"]) == EXIT_OK


def test_tls_takes_a_certificate_and_its_key_together(
    served: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    assert main(["web", "--url", "memory://", "--certfile", str(cert)]) == EXIT_USAGE
    assert "--certfile and --keyfile go together" in capsys.readouterr().err
    assert main(["web", "--url", "memory://", "--certfile", str(cert), "--keyfile", str(tmp_path / "no")]) == EXIT_USAGE
    assert "no such file" in capsys.readouterr().err
    assert served == []
    assert main(["web", "--url", "memory://", "--certfile", str(cert), "--keyfile", str(key)]) == EXIT_OK
    (call,) = served
    assert (call["ssl_certfile"], call["ssl_keyfile"]) == (str(cert), str(key))
    assert "at https://127.0.0.1:8080/" in capsys.readouterr().err


DOCS = [Path(__file__).resolve().parents[2] / "docs" / name for name in ("dashboard.md", "operations.md")]


def doc_commands() -> list[str]:
    """The ``alkstore web`` lines of the docs' fenced blocks (the dashboard's page and operations'), comments
    dropped."""
    found: list[str] = []
    for doc in DOCS:
        fenced = False
        for line in doc.read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif fenced and "alkstore web" in line:
                found.append(line.split("#")[0].strip())
    return found


def test_the_docs_have_their_commands() -> None:
    assert len(doc_commands()) >= 9


@pytest.mark.parametrize("line", doc_commands())
def test_every_command_in_the_docs_passes_the_commands_checks_as_written(
    line: str, served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cert.pem").write_text("a certificate\n")
    (tmp_path / "key.pem").write_text("its key\n")
    monkeypatch.setenv(URL_VARIABLE, "memory://")
    words = line.split()
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, secrets.token_urlsafe(24) if value == "..." else value)
    if "--url" in words:  # the command opens its store before serving: the connection target is the test's
        words[words.index("--url") + 1] = "memory://"
    assert words[:2] == ["alkstore", "web"]
    assert main(words[1:]) == EXIT_OK
    assert len(served) == 1
