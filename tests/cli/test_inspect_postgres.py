"""``status``, ``healthcheck``, ``jobs`` and ``schedules`` against a real PostgreSQL schema."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

import alkstore
from alkstore import Store
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, URL_VARIABLE, main
from alkstore.rules._names import SCHEDULER_LOCK
from tests._proc import ALKSTORE, run
from tests.cli._seed import delayed_running_and_dead
from tests.support import must_claim

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_dsn: str, pg_schema: str) -> Iterator[Store]:
    """A migrated schema, and a store on it (on the database's clock, as the commands are)."""
    with alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=2) as opened:
        yield opened


def cli(capsys: pytest.CaptureFixture[str], pg_dsn: str, schema: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", pg_dsn, "--schema", schema])
    out, err = capsys.readouterr()
    return code, out, err


def populate(store: Store) -> dict[str, int]:
    emails = store.queue("emails")
    ids: dict[str, int] = {"ready": emails.enqueue({"to": "ada@example.com"})}
    delayed_running_and_dead(emails, ids, "web-1")
    store.outbox("webhooks").enqueue({"event": "order.paid"})
    store.schedule("nightly", "@every 1d", "reports")
    return ids


def test_status_counts_the_queues_of_a_postgres_schema(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    populate(store)

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "status", "--json")

    assert code == EXIT_OK
    document = json.loads(out)
    counts = {q["queue"]: (q["ready"], q["delayed"], q["running"], q["dead"]) for q in document["queues"]}
    assert counts == {"emails": (1, 1, 1, 1), "__alkstore_outbox:webhooks": (1, 0, 0, 0)}
    assert all(q["lag_seconds"] >= 0 for q in document["queues"])
    assert [s["name"] for s in document["schedules"]] == ["nightly"]
    assert document["leader"] is None

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "status")
    assert code == EXIT_OK
    assert re.search(r"^emails +1 +1 +0 +1 +1 +\S+$", out, re.MULTILINE), out
    assert re.search(r"^nightly +1d +reports +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +-$", out, re.MULTILINE), out
    assert f"schema {pg_schema!r} at " in out
    assert re.search(r"^webhooks +1 +0 +0 +0 +\S+ +0$", out, re.MULTILINE), "an outbox in its own table"
    assert max(len(line) for line in out.splitlines() if not line.startswith(("QUEUE", "emails", "__"))) <= 79


def test_queues_pause_and_resume_a_queue_and_status_shows_it_paused_with_its_waiting_jobs(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    emails = store.queue("emails")
    for n in range(3):
        emails.enqueue(n, alkstore.EnqueueOpts(ordering_key="ada"))

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "queues", "pause", "emails")
    assert code == EXIT_OK
    assert out.startswith("paused queue 'emails': workers stop claiming its jobs within 2 s")
    assert store.queue_stats("emails")[0].paused
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "status")
    assert re.search(r"^emails \(paused\) +1 +0 +2 +0 +0 +\S+$", out, re.MULTILINE), out
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "status", "--json")
    (queue,) = json.loads(out)["queues"]
    assert (queue["paused"], queue["ready"], queue["waiting"]) == (True, 1, 2)

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "queues", "resume", "emails", "--json")
    assert (code, json.loads(out)) == (EXIT_OK, {"queue": "emails", "paused": False})
    assert not store.queue_stats("emails")[0].paused


def test_healthcheck_follows_the_leader_of_a_schema_with_schedules(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, pg_dsn, pg_schema, "healthcheck")[0] == EXIT_OK
    store.schedule("nightly", "@every 1d", "reports")

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "healthcheck")
    assert code == EXIT_ERROR
    assert out.splitlines()[:2] == [
        f"ok    database  reachable: schema {pg_schema!r} at {pg_dsn}",
        "ok    schema    current",
    ]
    assert out.splitlines()[2].startswith("FAIL  leader    no scheduler leads while 1 schedule exists")

    now = store.clock.now()
    assert store.engine.try_lock(SCHEDULER_LOCK, "runner-1", now, now + timedelta(minutes=5)) is not None
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "healthcheck", "--json")
    assert code == EXIT_OK
    assert json.loads(out)["checks"][2]["detail"].startswith("runner-1, lease until ")


def test_healthcheck_fails_on_an_unmigrated_schema_naming_the_migrate_command(
    pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, pg_dsn, pg_schema, "healthcheck")

    assert (code, err) == (EXIT_ERROR, "")
    lines = out.splitlines()
    assert lines[0].startswith("ok    database")
    assert lines[1].startswith(f"FAIL  schema    schema {pg_schema!r} has not been migrated")
    assert "alkstore migrate --url " in lines[1]
    assert lines[-1] == "unhealthy"


def test_healthcheck_fails_when_the_database_cannot_be_reached(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://postgres@127.0.0.1:1/test?connect_timeout=5"  # nothing listens on port 1

    code, out, err = cli(capsys, url, "anything", "healthcheck", "--json")

    assert (code, err) == (EXIT_ERROR, "")
    document = json.loads(out)
    assert document["healthy"] is False
    (check,) = document["checks"]
    assert (check["name"], check["ok"]) == ("database", False)
    assert "127.0.0.1" in check["detail"]


def test_jobs_commands_list_show_cancel_requeue_and_purge_on_postgres(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = populate(store)

    listed = json.loads(cli(capsys, pg_dsn, pg_schema, "jobs", "list", "emails", "--state", "dead", "--json")[1])
    assert [job["id"] for job in listed["jobs"]] == [ids["dead"]]
    assert listed["jobs"][0]["last_error"] == "550 mailbox unavailable"
    outbox = store.outbox("webhooks").queue
    (message,) = json.loads(cli(capsys, pg_dsn, pg_schema, "jobs", "list", outbox, "--json")[1])["jobs"]
    assert message["payload"] == {"event": "order.paid"}

    shown = json.loads(cli(capsys, pg_dsn, pg_schema, "jobs", "show", str(ids["running"]), "--json")[1])
    assert (shown["state"], shown["worker_id"]) == ("running", "web-1")

    code, out, _ = cli(capsys, pg_dsn, pg_schema, "jobs", "cancel", str(ids["delayed"]), str(ids["running"]))
    assert code == EXIT_OK
    assert out.splitlines() == [
        f"job {ids['delayed']}: cancelled",
        f"job {ids['running']}: running: its worker is told to stop it, and it ends cancelled",
    ]
    assert store.get_job(ids["delayed"]) is None

    assert cli(capsys, pg_dsn, pg_schema, "jobs", "requeue", str(ids["dead"]))[:2] == (
        EXIT_OK,
        f"job {ids['dead']}: requeued\n",
    )
    job = must_claim(store.queue("emails"))
    assert job.id == ids["dead"]
    job.fail("again")
    assert cli(capsys, pg_dsn, pg_schema, "jobs", "purge", "emails", "--older-than", "1d")[1] == (
        "purged 0 dead jobs of 'emails' that died at least 1d ago\n"
    )
    assert cli(capsys, pg_dsn, pg_schema, "jobs", "purge", "emails", "--older-than", "0")[1] == (
        "purged 1 dead job of 'emails'\n"
    )
    assert store.get_job(ids["dead"]) is None


def test_schedules_commands_on_postgres(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, pg_dsn, pg_schema, "schedules", "add", "digest", "@every 1h", "reports")[0] == EXIT_OK
    (listed,) = json.loads(cli(capsys, pg_dsn, pg_schema, "schedules", "list", "--json")[1])
    assert (listed["name"], listed["spec"], listed["last_boundary"]) == ("digest", "@every 1h", None)
    assert [schedule.name for schedule in store.schedules()] == ["digest"]
    assert cli(capsys, pg_dsn, pg_schema, "schedules", "remove", "digest")[0] == EXIT_OK
    assert store.schedules() == []


def test_the_installed_script_takes_the_url_with_its_password_from_the_environment(
    store: Store, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = urlsplit(pg_dsn)
    netloc = f"{parts.username or 'postgres'}:s3cret@{parts.netloc.rpartition('@')[2]}"
    monkeypatch.setenv(URL_VARIABLE, urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")))

    result = run([ALKSTORE, "status", "--schema", pg_schema])

    assert result.returncode == EXIT_OK, result.stderr
    assert ":***@" in result.stdout
    assert "s3cret" not in result.stdout + result.stderr


def test_queues_show_gives_a_queues_settings_with_its_rate_limits(
    store: Store, pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.queue("calls").configure(rate=alkstore.RateLimit(10, per=1), key_rate=alkstore.RateLimit(2, per=60))
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "queues", "show", "calls")
    assert code == EXIT_OK
    assert "  rate                10 per 1 s (a start every 0.1 s)\n" in out
    assert "  key rate            2 per 60 s per rate key (a start every 30 s)\n" in out
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "queues", "show", "plain", "--json")
    document = json.loads(out)
    assert (document["rate"], document["key_rate"], document["paused"]) == (None, None, False)
    code, out, _ = cli(capsys, pg_dsn, pg_schema, "queues", "show", "calls", "--json")
    assert json.loads(out)["key_rate"] == {"count": 2, "per": 60.0}
