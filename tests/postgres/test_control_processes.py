"""Queue controls with real processes on PostgreSQL: a keyed outbox delivered in commit order while
its courier is SIGKILLed and restarted, and a paused queue left alone by a running worker.

Real processes on the system clock: the tests assert what must hold however slow the machine is
(order, nothing lost, nothing claimed while paused) and bound their waits only generously.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import CONFIG_TTL, EnqueueOpts
from tests._proc import LiveProcess
from tests.support import PATIENCE, wait_until

from .test_worker_processes import App

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

COURIER = textwrap.dedent(
    """
    import json, os, signal, sys
    import alkstore

    dsn, schema, log = sys.argv[1:4]
    stop = alkstore.StopToken()
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())


    def deliver(payload, job):
        failed = payload["seq"] % 5 == 2 and job.attempts == 1  # the endpoint fails some first tries
        with open(log, "a") as out:
            out.write(json.dumps({"pid": os.getpid(), "job": job.id, "ok": not failed, **payload}) + "\\n")
        if failed:
            raise RuntimeError("the endpoint answered 503")


    with alkstore.open(dsn, schema=schema, max_size=2) as store:
        print("courier ready", file=sys.stderr, flush=True)
        store.outbox("ledger").run("courier-%d" % os.getpid(), deliver, stop, poll_interval=0.1)
    """
)

KEYS = ("account:1", "account:2", "account:3")
PER_KEY = 40


def deliveries(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def more_deliveries(log: Path, count: int) -> Callable[[], bool]:
    """Whether ``count`` more lines than now are in the log."""
    wanted = len(deliveries(log)) + count
    return lambda: len(deliveries(log)) >= wanted


def test_a_keyed_outbox_is_delivered_in_commit_order_per_key_across_courier_sigkills(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    script = tmp_path / "courier.py"
    script.write_text(COURIER, encoding="utf-8")
    log = tmp_path / "deliveries.jsonl"
    log.touch()
    store = alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=4)
    try:
        store.outbox("ledger").configure(visibility_timeout=2, backoff_base=0.1)
        committed: dict[str, list[int]] = {key: [] for key in KEYS}

        def produce(key: str) -> None:  # one producer per key: its transactions commit in seq order
            for seq in range(PER_KEY):
                with store.transaction() as tx:
                    store.outbox_enqueue_tx(tx, "ledger", {"key": key, "seq": seq}, EnqueueOpts(ordering_key=key))
                committed[key].append(seq)

        producers = [threading.Thread(target=produce, args=(key,)) for key in KEYS]
        for producer in producers:
            producer.start()
        couriers: list[LiveProcess] = []
        for _ in range(3):  # two couriers killed mid-stream, the third drains the rest
            courier = LiveProcess([sys.executable, str(script), pg_dsn, pg_schema, str(log)], cwd=tmp_path)
            couriers.append(courier)
            courier.wait_log(lambda line: "courier ready" in line, timeout=PATIENCE)
            wait_until(more_deliveries(log, 15), "15 deliveries by this courier")
            if len(couriers) < 3:
                courier.proc.send_signal(signal.SIGKILL)
                courier.finish(timeout=PATIENCE)
        for producer in producers:
            producer.join(timeout=PATIENCE)
        total = len(KEYS) * PER_KEY
        wait_until(lambda: len({d["job"] for d in deliveries(log)}) >= total, "every message delivered", PATIENCE * 2)
        wait_until(lambda: store.queue_stats(store.outbox("ledger").queue)[0].ready == 0, "the outbox drained")
        last = couriers[-1]
        last.proc.send_signal(signal.SIGTERM)
        assert last.finish(timeout=PATIENCE) == 0
    finally:
        for courier in couriers:
            courier.close()
        store.close()
    delivered = [d for d in deliveries(log) if d["ok"]]
    assert len({d["pid"] for d in delivered}) == 3  # every courier delivered some
    for key in KEYS:
        mine = [d["seq"] for d in delivered if d["key"] == key]
        first_seen = list(dict.fromkeys(mine))
        assert first_seen == committed[key] == list(range(PER_KEY))  # nothing lost, in commit order
        # A redelivery (a courier killed between delivering and acking) repeats the latest message
        # only, and a failed delivery is retried before the next one goes: a later message never
        # came before an earlier one was done.
        for index, seq in enumerate(mine):
            assert seq >= max(mine[:index], default=0)


def test_a_paused_queue_is_left_alone_by_a_running_worker_until_it_is_resumed(
    tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=1).close()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APP_LOG", str(tmp_path / "events.jsonl"))
    monkeypatch.delitem(sys.modules, "procapp", raising=False)
    app = App(tmp_path, pg_dsn, pg_schema)
    with alkstore.open(pg_dsn, schema=pg_schema, max_size=2) as store, app.worker("--concurrency", "2") as worker:
        queue = store.queue("work")
        app.enqueue(1)
        wait_until(lambda: len(app.events("done")) == 1, "the first job run")  # the worker runs jobs
        queue.pause()
        time.sleep(CONFIG_TTL.total_seconds() * 2)  # every worker has read the pause by now
        ids = app.enqueue(5)
        time.sleep(CONFIG_TTL.total_seconds() * 2 + 1)  # a running worker would have claimed them
        assert len(app.events("start")) == 1
        stats = store.queue_stats("work")[0]
        assert (stats.paused, stats.ready, stats.running) == (True, 5, 0)
        assert worker.proc.poll() is None
        queue.resume()
        wait_until(lambda: {e["job"] for e in app.events("done")} >= set(ids), "the paused jobs run after the resume")
        assert not store.queue_stats("work")[0].paused
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=PATIENCE) == 0
