"""``alkstore migrate``, ``tick`` and ``run-schedules`` against a real PostgreSQL schema."""

from __future__ import annotations

import re
import signal
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

import alkstore
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, main
from tests._proc import ALKSTORE, LiveProcess, run

pytestmark = pytest.mark.postgres

FIRED = re.compile(r"^fired 'nightly' boundary (\S+) as job (\d+) on 'reports'$")


@pytest.fixture
def migrated(pg_dsn: str, pg_schema: str) -> str:
    """``pg_schema``, migrated through the command line."""
    assert main(["migrate", "--url", pg_dsn, "--schema", pg_schema]) == EXIT_OK
    return pg_schema


def test_migrate_creates_a_fresh_schema_and_then_has_nothing_to_do(
    pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--url", pg_dsn, "--schema", pg_schema]) == EXIT_OK
    assert capsys.readouterr().out.startswith(f"alkstore: migrated schema {pg_schema!r} at ")

    assert main(["migrate", "--url", pg_dsn, "--schema", pg_schema]) == EXIT_OK
    assert capsys.readouterr().out.endswith("is already at the current schema version; nothing to do\n")
    with alkstore.open(pg_dsn, schema=pg_schema, max_size=2) as store:
        assert store.schedules() == []


def test_a_password_in_the_url_never_appears_in_what_migrate_prints(
    pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = urlsplit(pg_dsn)
    netloc = f"{parts.username or 'postgres'}:s3cret@{parts.netloc.rpartition('@')[2]}"
    with_password = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))  # trust auth ignores it

    assert main(["migrate", "--url", with_password, "--schema", pg_schema]) == EXIT_OK

    printed = capsys.readouterr()
    assert ":***@" in printed.out
    assert "s3cret" not in printed.out + printed.err


@pytest.mark.parametrize("command", ["tick", "run-schedules"])
def test_a_command_on_an_unmigrated_schema_exits_1_naming_the_migrate_command(
    command: str, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--url", pg_dsn, "--schema", pg_schema]) == EXIT_ERROR

    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("alkstore: ")
    assert "alkstore migrate --url " in err
    assert f"--schema {pg_schema}" in err
    assert "Traceback" not in err


def test_tick_fires_each_elapsed_boundary_once_and_prints_the_fires(
    pg_dsn: str, migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Registered 65 minutes ago (by a clock set back), an @every 10m schedule owes six
    # boundaries, the newest five minutes ago; the next is five minutes ahead of the tick.
    registered = datetime.now(UTC) - timedelta(minutes=65)
    clock = alkstore.ManualClock(registered)
    with alkstore.open(pg_dsn, schema=migrated, clock=clock, max_size=2) as store:
        store.schedule("nightly", "@every 10m", "reports", {"kind": "digest"})
        capsys.readouterr()

        assert main(["tick", "--url", pg_dsn, "--schema", migrated]) == EXIT_OK
        lines = capsys.readouterr().out.splitlines()
        assert lines[-1] == "6 fires"
        fired = [FIRED.match(line) for line in lines[:-1]]
        assert all(fired), lines
        boundaries = [datetime.fromisoformat(m.group(1)) for m in fired if m]
        assert boundaries == [registered + timedelta(minutes=10 * k) for k in range(1, 7)]
        for match in fired:
            assert match is not None
            info = store.get_job(int(match.group(2)))
            assert info is not None
            assert info.schedule == "nightly"
            assert info.boundary == datetime.fromisoformat(match.group(1))

        assert main(["tick", "--url", pg_dsn, "--schema", migrated]) == EXIT_OK
        assert capsys.readouterr().out == "0 fires\n"


@pytest.mark.slow
def test_run_schedules_leads_on_postgres_and_releases_the_lease_on_sigterm(pg_dsn: str, migrated: str) -> None:
    with LiveProcess([ALKSTORE, "run-schedules", "--url", pg_dsn, "--schema", migrated]) as runner:
        line = runner.wait_for(lambda stream, text: "leadership acquired by" in text, timeout=60)
        runner.proc.send_signal(signal.SIGTERM)
        code = runner.finish(timeout=60)

    assert code == EXIT_OK, runner.stderr
    owner = line.rsplit(" ", 1)[1].strip()
    assert f"scheduler leadership released by {owner}" in "".join(runner.stderr)


def test_the_installed_script_migrates_too(pg_dsn: str, pg_schema: str) -> None:
    result = run([ALKSTORE, "migrate", "--url", pg_dsn, "--schema", pg_schema])

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout.startswith("alkstore: migrated ")
