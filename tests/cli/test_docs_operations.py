"""The operator commands of docs/deploying.md and docs/operations.md run as written, each in a database of its
own (only where they connect is replaced): ``migrate --grant``, the ``jobs``/``schedules``/``status`` block, the
status it shows, and the container probes."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts, ManualClock
from alkstore.adapters.cli import EXIT_ERROR, EXIT_OK, URL_VARIABLE
from alkstore.engine import WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK
from tests._docs import block
from tests._proc import ALKSTORE, LiveProcess, command_env
from tests.support import PATIENCE, must_claim, url_of

pytestmark = pytest.mark.postgres

DEPLOYING = "docs/deploying.md"
OPERATIONS = "docs/operations.md"


@pytest.fixture
def database(pg_database: str) -> str:
    """A database of the test's own, where ids start at 1 and the default schema is free."""
    return pg_database


def alkstore_command(line: str, url: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run a documented ``alkstore …`` line (its ``#`` comment dropped) with ``ALKSTORE_URL`` set to ``url``."""
    args = shlex.split(line, comments=True)
    assert args[0] == "alkstore", line
    return subprocess.run(
        [ALKSTORE, *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**command_env(), URL_VARIABLE: url},
        stdin=subprocess.DEVNULL,
    )


# -- Roles: migrate as the owner, grant the application role ----------------------------------


def test_migrate_with_grant_makes_the_role_an_application_role(pg_dsn: str, database: str) -> None:
    command = block(DEPLOYING, "--grant app").strip()
    assert command == "alkstore migrate --url postgresql://owner@db:5432/app --schema alkstore --grant app"
    owner, app = (f"alk_{what}_{secrets.token_hex(5)}" for what in ("owner", "app"))
    password = secrets.token_hex(12)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for role in (owner, app):
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            )
    name = urlsplit(database).path.lstrip("/")
    owner_url = url_of(database, user=owner, password=password)
    app_url = url_of(database, user=app, password=password)
    try:
        with psycopg.connect(database, autocommit=True) as conn:  # the owner may create the schema
            conn.execute(
                sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(name), sql.Identifier(owner))
            )
        args = shlex.split(command)[1:]
        args[args.index("--url") + 1] = owner_url
        args[args.index("--grant") + 1] = app
        migrated = subprocess.run(
            [ALKSTORE, *args], capture_output=True, text=True, timeout=120, env=command_env(), check=False
        )
        assert migrated.returncode == EXIT_OK, migrated.stderr

        # The application role opens with migrate=True (a current schema is only read) and works ...
        with alkstore.open(app_url, schema="alkstore", migrate=True, max_size=2) as store:
            job_id = store.queue("emails").enqueue({"to": "ada@example.com"})
            must_claim(store.queue("emails")).ack()
            assert store.get_job(job_id) is None
        # ... without any DDL right.
        with psycopg.connect(app_url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE alkstore.mine (id int)")
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            for role in (app, owner):
                conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# -- Operating alkstore: the status the page shows ---------------------------------------------

STATUS_COMMAND = "alkstore status --schema readme_demo"
#: What changes from run to run: instants and durations.
_INSTANT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_DURATION = re.compile(r" +(?:\d+h)?(?:\d+m)?\d+(?:\.\d)?s\b")  # right-aligned: its width varies


def masked(text: str) -> str:
    return _DURATION.sub(" <duration>", _INSTANT.sub("<instant>", text))


def seed_the_status_demo(url: str) -> None:
    """The state the documented status shows: four queues (one an outbox's), three schedules, a leader and a
    worker busy with two emails."""
    now = datetime.now(UTC).replace(microsecond=0)
    clock = ManualClock(now - timedelta(seconds=31))
    with alkstore.open(url, schema="readme_demo", migrate=True, clock=clock, max_size=2) as store:
        store.schedule("heartbeat", "@every 30s", "maintenance")
        store.schedule("cleanup", "@every 10m", "maintenance")
        store.schedule("nightly-digest", "@every 1d", "reports")
        clock.advance(31)
        assert len(store.tick()) == 1  # heartbeat fires once: a maintenance job and its LAST boundary
        store.queue("maintenance").enqueue({"table": "events"})
        with store.transaction() as tx:
            store.outbox_enqueue_tx(tx, "webhooks", {"event": "order.paid", "order": 42})
        for n in range(3):
            store.queue("reports").enqueue({"report": n})
        for n in range(10):
            store.queue("reports").enqueue({"report": n}, EnqueueOpts(delay=3600))
        emails = store.queue("emails")
        emails.enqueue({"to": "later@example.com"}, EnqueueOpts(delay=600))
        emails.enqueue({"to": "bounce@example.com"}, EnqueueOpts(priority=9))
        must_claim(emails, "vm:12358:604c1f2e").fail("550 mailbox unavailable")
        for to in ("ada@example.com", "bob@example.com"):
            emails.enqueue({"to": to})
            must_claim(emails, "vm:12358:604c1f2e")
        now = clock.now()
        owner = "vm:12360:1796121889280258755:41e6a8b7"
        assert store.engine.try_lock(SCHEDULER_LOCK, owner, now, now + timedelta(seconds=10))
        store.engine.record_worker(
            WorkerRecord(
                "vm:12358:604c1f2e", "vm", 12358, ("emails", "reports"), 2, now, now, running=2, processed=0, failed=0
            )
        )


def test_status_prints_what_the_docs_show(database: str) -> None:
    shown = block(OPERATIONS, STATUS_COMMAND)
    export, command, *printed = shown.splitlines()
    documented_url = "postgresql://postgres@127.0.0.1:5432/test"
    assert export == f"$ export ALKSTORE_URL={documented_url}"
    assert command == f"$ {STATUS_COMMAND}"
    seed_the_status_demo(database)

    result = alkstore_command(STATUS_COMMAND, database)

    assert result.returncode == EXIT_OK, result.stderr
    expected = masked("\n".join(printed).replace(documented_url, database))
    assert masked(result.stdout.rstrip("\n")) == expected


# -- Operating alkstore: then act on what you see ----------------------------------------------


def test_the_operators_commands_run_as_written(database: str) -> None:
    lines = block(OPERATIONS, "alkstore jobs list emails --state dead").splitlines()
    with alkstore.open(database, migrate=True, max_size=2) as store:
        # Ids as the block has them, in a database of their own: job 5 is dead on emails, 12 and 13 pending there.
        other, emails = store.queue("other"), store.queue("emails")
        assert [other.enqueue(n) for n in range(4)] == [1, 2, 3, 4]
        assert emails.enqueue({"to": "bounce@example.com"}) == 5
        must_claim(emails).fail("550 mailbox unavailable")
        assert [other.enqueue(n) for n in range(6)] == [6, 7, 8, 9, 10, 11]
        assert [emails.enqueue({"to": to}, EnqueueOpts(delay=60)) for to in ("x@example.com", "y@example.com")] == [
            12,
            13,
        ]

    *once, watch = lines
    outcomes = {line.split("#")[0].strip(): alkstore_command(line, database) for line in once}

    assert {line: result.returncode for line, result in outcomes.items()} == dict.fromkeys(outcomes, EXIT_OK), {
        line: result.stderr for line, result in outcomes.items()
    }
    listed = outcomes["alkstore jobs list emails --state dead"].stdout
    assert re.search(r"^\s*5\s", listed, re.MULTILINE), listed
    shown = json.loads(outcomes["alkstore jobs show 5 --json"].stdout)
    assert (shown["id"], shown["state"], shown["payload"]) == (5, "dead", {"to": "bounce@example.com"})
    with alkstore.open(database, max_size=2) as store:
        requeued = store.get_job(5)
        assert requeued is not None
        assert requeued.state == "pending"
        assert requeued.attempts == 0
        assert store.get_job(12) is None
        assert store.get_job(13) is None
        assert [(s.name, s.spec, s.queue) for s in store.schedules()] == [("cleanup", "@every 10m", "maintenance")]

    args = shlex.split(watch, comments=True)
    assert args == ["alkstore", "status", "--watch", "2"]
    with LiveProcess([ALKSTORE, *args[1:]], env={URL_VARIABLE: database}) as watcher:
        watcher.wait_for(lambda _stream, line: line.startswith("alkstore status at"), timeout=PATIENCE)
        watcher.proc.send_signal(signal.SIGINT)
        assert watcher.finish(timeout=PATIENCE) == EXIT_OK, watcher.stderr


# -- docs/operations.md: the container probes ---------------------------------------------------


def test_the_container_probes_run_healthcheck(database: str) -> None:
    dockerfile = block("docs/operations.md", "HEALTHCHECK --interval=30s").strip()
    probe = block("docs/operations.md", "livenessProbe:")
    docker_command = shlex.split(dockerfile.partition(" CMD ")[2])
    exec_line = re.search(r"exec: \{command: \[([^\]]*)\]\}", probe)
    assert exec_line is not None, probe
    kubernetes_command = [word.strip() for word in exec_line.group(1).split(",")]
    assert docker_command == kubernetes_command == ["alkstore", "healthcheck"]
    line = " ".join(docker_command)

    assert alkstore_command(line, database).returncode == EXIT_ERROR, "no schema yet: unhealthy, 1 (never 2)"
    alkstore.open(database, migrate=True, max_size=1).close()
    healthy = alkstore_command(line, database)
    assert healthy.returncode == EXIT_OK, healthy.stdout + healthy.stderr
    unreachable = url_of(database, database="alk_no_such_database")
    assert alkstore_command(line, unreachable).returncode == EXIT_ERROR
