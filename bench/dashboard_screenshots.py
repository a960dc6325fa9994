"""PNG screenshots of the web dashboard for the docs, taken with headless Chromium.

Run by hand (needs the ``web`` and ``test`` extras and Debian's ``chromium`` and
``chromium-driver``)::

    .venv/bin/python bench/dashboard_screenshots.py [--out docs/img]

It seeds a fresh ``memory://`` store on a manual clock with a small shop's queues (ready,
delayed, running and dead jobs, two workers whose reports carry an hour of throughput counts and per-task
figures (run time and pickup latency, as a worker's report stores them through the operations port), a
leader, schedules, a queue no worker serves, a worker gone mid-run, a few logged actions and a small
workflow: a chain that fans out to three jobs and back in to one, part run), serves the dashboard with
uvicorn on a free loopback port, and saves ``overview.png``, ``queue.png``, ``job.png``,
``dead-letters.png``, ``workers.png``, ``actions.png``, ``charts.png``, ``graph.png`` and, 390 px
wide, ``overview-phone.png``, ``actions-phone.png`` and ``graph-phone.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

import alkstore
from alkstore import AsyncStore, EnqueueOpts, ManualClock
from alkstore.adapters.web import create_app
from alkstore.display import minute_of
from alkstore.engine import NewJob, TaskFiguresRecord, ThroughputRecord, WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK

START = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
WORKERS = (("web-1:4242", ("emails", "webhooks"), 8), ("batch-1:1177", ("reports", "thumbnails", "media"), 4))
#: A worker that stopped reporting four minutes ago, its claimed job still running.
GONE = ("web-2:5151", ("emails",), 8)
#: The task each queue's jobs run, with its usual run time and pickup latency (ms) for the charts.
TASKS = {
    "emails": ("send_email", 420.0, 900.0),
    "webhooks": ("deliver_webhook", 260.0, 1_400.0),
    "reports": ("build_report", 5_800.0, 2_500.0),
    "thumbnails": ("resize_image", 900.0, 600.0),
    "media": ("parse_upload", 2_200.0, 300.0),
}


async def seed(store: AsyncStore, clock: ManualClock) -> dict[str, int]:
    """Queues in every phase, dead letters of a few kinds, schedules and a leader; the ids worth a picture."""
    ids: dict[str, int] = {}
    await store.schedule("nightly-digest", "@every 1d", "reports", {"kind": "digest"})
    await store.schedule("sync-crm", "@every 15m", "webhooks", {"target": "crm"})
    await store.schedule("warm-cache", "@every 5m", "thumbnails", {"sizes": [64, 256]})
    emails = store.queue("emails")
    await emails.enqueue_many([{"to": f"user{n}@example.com", "template": "welcome"} for n in range(137)])
    await emails.enqueue_many([{"to": f"later{n}@example.com"} for n in range(12)], EnqueueOpts(delay=3600))
    now = clock.now()
    hooks = [{"customer": 4200 + n % 7, "event": "invoice.paid"} for n in range(58)]
    await store.engine.enqueue(
        [NewJob("webhooks", json.dumps(hook).encode(), 0, now, None, 3, task="deliver_webhook") for hook in hooks], now
    )
    await store.queue("thumbnails").enqueue_many([{"image": f"img/{n}.jpg"} for n in range(9)])
    await store.queue("reports").enqueue({"kind": "monthly", "month": "2026-02"}, EnqueueOpts(priority=5))
    errors = [
        ("webhooks", "ConnectionError: 503 Service Unavailable from https://crm.example.com/hooks/{id}", 14),
        ("webhooks", "TimeoutError: no answer from https://erp.example.com within 10 s", 5),
        ("emails", "SMTPRecipientsRefused: 550 5.1.1 mailbox unavailable", 3),
    ]
    for queue, error, count in errors:
        made = await store.queue(queue).enqueue_many(
            [{"customer": 4200 + n, "attempt": "last"} for n in range(count)], EnqueueOpts(priority=9, max_attempts=1)
        )
        for _ in made:
            job = await store.queue(queue).claim("web-1:4242")
            assert job is not None
            await job.fail(error.format(id=job.id))
        ids.setdefault("dead", made[0])
    running = await store.queue("reports").claim("batch-1:1177")
    assert running is not None
    ids["running"] = running.id
    await store.queue("exports").enqueue_many([{"export": n} for n in range(3)])  # no worker serves exports
    held = await store.queue("emails").claim(GONE[0])  # held by a worker killed mid-run
    assert held is not None
    for action, target, outcome, role in (
        ("pause_queue", "queue exports", "Paused exports: workers stop claiming its jobs within seconds.", "full"),
        ("configure_queue", "queue webhooks", "Saved the settings of webhooks: lease 1m00s, 8 attempts.", "full"),
        ("requeue_job", f"job {ids['dead']}", "refused (403): the read-only token reads", "read"),
        ("filter_bulk", "dead jobs of webhooks, task deliver_webhook", "Requeued 14 dead jobs of webhooks.", "full"),
        ("resume_queue", "queue exports", "Resumed exports: workers claim its jobs again within seconds.", "full"),
    ):
        await store.log_action(action, target, outcome, role=role, address="10.0.4.17")
    ids["graph"] = await workflow(store)
    return ids


async def workflow(store: AsyncStore) -> int:
    """A chain (fetch, then parse) that fans out to three resizes and back in to a publish: the fetch done (its
    result kept), the parse running, the rest waiting on it; the id of the publish job."""
    pipeline = store.queue("media")
    await pipeline.configure(keep_results=86_400)
    graph = store.graph()
    graph.add("fetch", "media", {"upload": 8812}, task="fetch_upload")
    graph.add("parse", "media", {"upload": 8812}, after=["fetch"], task="parse_upload")
    sizes = ("small", "medium", "large")
    for size in sizes:
        graph.add(size, "media", {"upload": 8812, "size": size}, after=["parse"], task="resize_image")
    graph.add("publish", "media", {"upload": 8812}, after=sizes, task="publish_album")
    ids = await store.enqueue_graph(graph)
    fetched = await pipeline.claim("batch-1:1177")
    assert fetched is not None
    await fetched.ack({"bytes": 18_204_331})
    assert await pipeline.claim("batch-1:1177") is not None  # the parse, running
    return ids["publish"]


async def lead(store: AsyncStore, at: datetime) -> None:
    """A scheduler leader holding its lease as of ``at``."""
    assert await store.engine.try_lock(SCHEDULER_LOCK, "sched-1:880:1772443800:9c21", at, at + timedelta(seconds=30))


def an_hour(n: int, queues: tuple[str, ...], at: datetime) -> list[ThroughputRecord]:
    """Worker ``n``'s runs per queue and minute over the hour up to ``at``, at a pace that wanders a little."""
    counts = []
    for back in range(60, 0, -1):
        minute = minute_of(at) - timedelta(minutes=back)
        for q, queue in enumerate(queues):
            done = (140, 50)[n] // (q + 1) + (back * 7 + n * 3 + q) % 23 + (40 if 18 <= back <= 24 else 0)
            failed = 6 if (queue == "webhooks" and 30 <= back <= 33) else int((back + n + q) % 9 == 0)
            counts.append(ThroughputRecord(queue, minute, done, failed))
    return counts


def figures_of(counts: list[ThroughputRecord]) -> list[TaskFiguresRecord]:
    """The per-task figures a worker reports beside ``counts`` (ADR 075): each minute's runs of its queue's task,
    their summed run time and pickup latency, slower while the queue is busiest (the minutes with 40 more runs)."""
    figures = []
    for count in counts:
        task, run_ms, latency_ms = TASKS[count.queue]
        back = int((minute_of(START) - count.minute).total_seconds() // 60)
        busy = 1.0 + (0.8 if 18 <= back <= 24 else 0.0) + ((back * 13) % 7) / 20
        runs = count.done + count.failed
        figures.append(
            TaskFiguresRecord(
                count.queue,
                task,
                count.minute,
                count.done,
                count.failed,
                runs * run_ms * busy,
                runs * latency_ms * busy**2,
            )
        )
    return figures


async def report_workers(store: AsyncStore, at: datetime) -> None:
    """Both workers' reports as of ``at``, each with its last hour's runs per queue and minute."""
    for n, (worker_id, queues, concurrency) in enumerate(WORKERS):
        counts = an_hour(n, queues, at)
        processed = sum(count.done + count.failed for count in counts)
        failed = sum(count.failed for count in counts)
        host, pid = worker_id.split(":")
        record = WorkerRecord(
            worker_id,
            host,
            int(pid),
            queues,
            concurrency,
            START - timedelta(hours=3),
            at,
            running=concurrency // 2,
            processed=1200 + processed,
            failed=7 + failed,
        )
        await store.engine.record_worker(record, counts, figures_of(counts))
    gone_id, gone_queues, gone_concurrency = GONE
    gone_host, gone_pid = gone_id.split(":")
    seen = at - timedelta(minutes=4)
    await store.engine.record_worker(
        WorkerRecord(
            gone_id, gone_host, int(gone_pid), gone_queues, gone_concurrency, seen - timedelta(hours=1), seen, running=1
        )
    )


def chrome() -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    clock = ManualClock(START)
    opened: dict[str, Any] = {}

    async def open_store() -> AsyncStore:
        store = await alkstore.open_async("memory://", clock=clock)
        opened.update(store=store, loop=asyncio.get_running_loop(), ids=await seed(store, clock))
        return store

    server = uvicorn.Server(uvicorn.Config(create_app(open_store), log_level="warning", lifespan="on"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    def call(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, opened["loop"]).result(30)

    try:
        call(report_workers(opened["store"], clock.now()))
        call(lead(opened["store"], clock.now()))
        driver = chrome()
        try:
            pages = {
                "overview.png": "/",
                "queue.png": "/queues/webhooks?contains=%7B%22customer%22%3A+4203%7D",
                "job.png": f"/jobs/{opened['ids']['dead']}",
                "dead-letters.png": "/dead",
                "workers.png": "/workers",
                "actions.png": "/actions",
                "charts.png": "/charts?queue=emails",
                "graph.png": f"/jobs/{opened['ids']['graph']}/graph",
                "overview-phone.png": "/",
                "actions-phone.png": "/actions",
                "graph-phone.png": f"/jobs/{opened['ids']['graph']}/graph",
            }
            for name, path in pages.items():
                width = 390 if "phone" in name else 1280
                driver.set_window_size(width, 900)
                driver.get(url + path)
                height = driver.execute_script("return document.documentElement.scrollHeight")
                chrome_bars = driver.execute_script("return window.outerHeight - window.innerHeight")
                driver.set_window_size(width, min(max(int(height), 600), 1800) + int(chrome_bars))
                driver.save_screenshot(str(args.out / name))
                print(f"wrote {args.out / name}")
        finally:
            driver.quit()
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
