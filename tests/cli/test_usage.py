"""Exit status and error lines of the command line: 0 ok, 1 runtime error, 2 usage error."""

from __future__ import annotations

import pytest

import alkstore
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from tests._proc import ALKSTORE, run


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("alkstore: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "required: COMMAND"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["demo", "--seconds", "0"], "more than 0"),
        (["demo", "--seconds", "-3"], "more than 0"),
        (["demo", "--seconds", "nan"], "more than 0"),
        (["demo", "--seconds", "soon"], "not a number of seconds"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
        (["migrate"], "required: --url"),
        (["tick", "--schema", "s"], "required: --url"),
        (["run-schedules"], "required: --url"),
        (["schedules", "add", "nightly", "every 1d", "reports", "--url", "memory://"], "is not of the form"),
        (["schedules", "add", "nightly", "0 2 * * *", "reports"], "cron expressions are not supported"),
        (["schedules", "add", "nightly", "@every 0s", "reports"], "must be at least 1s"),
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_problem(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE

    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert complaint in line
    assert "--help" in line
    assert captured.out == ""


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for command in ("demo", "migrate", "tick", "run-schedules"):
        assert command in out
    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out == f"alkstore {alkstore.__version__}\n"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["tick", "--url", "nowhere"], "expected a URL"),
        (["tick", "--url", "carrier-pigeon://coop"], "no alkstore engine for scheme 'carrier-pigeon'"),
        (["tick", "--url", "memory://", "--schema", "s"], "takes no options"),
    ],
)
def test_an_alkstore_error_exits_1_with_one_line_and_no_traceback(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_ERROR

    line = one_error_line(capsys.readouterr().err)
    assert complaint in line


def test_tick_on_an_empty_store_prints_that_nothing_fired(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tick", "--url", "memory://"]) == EXIT_OK

    assert capsys.readouterr().out == "0 fires\n"


def test_migrate_says_when_there_is_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--url", "memory://"]) == EXIT_OK

    assert capsys.readouterr().out == "alkstore: memory:// is already at the current schema version; nothing to do\n"


def test_the_installed_script_reports_usage_errors_with_status_2() -> None:
    result = run([ALKSTORE, "demo", "--seconds", "never"])

    assert result.returncode == EXIT_USAGE
    one_error_line(result.stderr)
    assert result.stdout == ""
