"""``alkstore worker`` delivers an application's outboxes through its couriers (ADR 057), in both runtimes.

The process tests run the installed script on a fresh PostgreSQL schema with real signals; the
application's deliveries append one line per message to a file.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import pytest

import alkstore
from alkstore.adapters.cli import EXIT_OK, EXIT_USAGE, main
from alkstore.adapters.cli._work import async_tasks, choose_runtime
from tests.support import PATIENCE

from .test_worker_runtime import App, importable, migrated

__all__ = ["importable", "migrated"]  # the fixtures, shared with test_worker_runtime

#: An application whose courier of ``webhooks`` is plain and whose courier of ``slow`` hangs (a plain
#: delivery runs on a thread in either runtime; ``ASYNC_COURIER`` is its async twin).
PLAIN_COURIER = textwrap.dedent(
    """
    import os, time
    import alkstore

    tasks = alkstore.Tasks()


    @tasks.courier("webhooks")
    def post_webhook(payload, job):
        with open(os.environ["APP_LOG"], "a") as log:
            log.write(f"delivered {payload['order']} attempt {job.attempts}\\n")


    @tasks.courier("slow")
    def hang(payload, job):
        with open(os.environ["APP_LOG"], "a") as log:
            log.write("hanging\\n")
        time.sleep(3600)
    """
)
ASYNC_COURIER = textwrap.dedent(
    """
    import asyncio, os
    import alkstore

    tasks = alkstore.Tasks()


    @tasks.courier("webhooks")
    async def post_webhook(payload, job):
        await asyncio.sleep(0.01)
        with open(os.environ["APP_LOG"], "a") as log:
            log.write(f"delivered {payload['order']} attempt {job.attempts}\\n")
    """
)


def write_messages(dsn: str, schema: str, outbox: str, *orders: int) -> list[alkstore.JobId]:
    """One message per order in ``outbox``, each written in a transaction as an application does."""
    with alkstore.open(dsn, schema=schema, max_size=2) as store:
        ids = []
        for order in orders:
            with store.transaction() as tx:
                ids.append(store.outbox_enqueue_tx(tx, outbox, {"event": "order.created", "order": order}))
        return ids


def test_an_async_def_delivery_makes_auto_choose_the_async_worker(importable: Path) -> None:
    plain, coroutine = App(importable, PLAIN_COURIER).tasks(), App(importable, ASYNC_COURIER).tasks()

    assert async_tasks(plain) == []
    assert choose_runtime(plain, "auto") == "sync"
    assert [name.rsplit(":", 1)[1] for name in async_tasks(coroutine)] == ["post_webhook"]
    assert choose_runtime(coroutine, "auto") == "async"


def test_outboxes_without_a_courier_are_a_usage_error_before_connecting(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = App(importable, PLAIN_COURIER)
    url = "postgresql://postgres@127.0.0.1:1/nowhere"  # port 1 answers nobody

    assert main(["worker", "--app", app.spec, "--url", url, "--outboxes", "webhooks,audit"]) == EXIT_USAGE

    err = capsys.readouterr().err
    assert "--outboxes: the app has no courier for 'audit' (couriers: 'slow', 'webhooks')" in err


def test_the_worker_help_says_it_delivers_outboxes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--help"]) == EXIT_OK

    text = " ".join(capsys.readouterr().out.split())
    assert "--outboxes A,B" in text
    assert "(@tasks.courier)" in text


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("source", [PLAIN_COURIER, ASYNC_COURIER], ids=["sync", "async"])
def test_the_worker_delivers_messages_written_in_transactions_then_stops_on_sigterm(
    importable: Path, pg_dsn: str, migrated: str, source: str
) -> None:
    app = App(importable, source)
    write_messages(pg_dsn, migrated, "webhooks", 1, 2)

    with app.worker(pg_dsn, migrated, "--outboxes", "webhooks", "--concurrency", "2") as worker:
        app.wait_for_runs(worker, "delivered 1 attempt 1", "delivered 2 attempt 1")
        write_messages(pg_dsn, migrated, "webhooks", 3)  # one written while it runs: woken, not polled for
        app.wait_for_runs(worker, "delivered 1 attempt 1", "delivered 2 attempt 1", "delivered 3 attempt 1")
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=PATIENCE * 2)

    log = "".join(worker.stderr)
    assert code == EXIT_OK, log
    assert ("async worker " in log) == (source is ASYNC_COURIER)
    assert "stopped: 3 processed (3 ok, 0 retried, 0 dead)" in log
    with alkstore.open(pg_dsn, schema=migrated, max_size=2) as store:
        stats = {s.queue: s for s in store.queue_stats()}
        outbox = stats.get(store.outbox("webhooks").queue)
        assert outbox is None or (outbox.ready, outbox.running, outbox.dead) == (0, 0, 0)


@pytest.mark.postgres
@pytest.mark.slow
def test_sigterm_hands_back_a_delivery_still_under_way_after_the_grace(
    importable: Path, pg_dsn: str, migrated: str
) -> None:
    app = App(importable, PLAIN_COURIER)
    (message,) = write_messages(pg_dsn, migrated, "slow", 1)

    with app.worker(pg_dsn, migrated, "--outboxes", "slow", "--grace", "0.5") as worker:
        app.wait_for_runs(worker, "hanging")
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=PATIENCE * 2)

    log = "".join(worker.stderr)
    assert code == EXIT_OK, log
    assert "1 handed back" in log
    with alkstore.open(pg_dsn, schema=migrated, max_size=2) as store:
        info = store.get_job(message)
        assert info is not None
        assert (info.state, info.attempts, info.worker_id) == (alkstore.JobState.PENDING, 0, None)
