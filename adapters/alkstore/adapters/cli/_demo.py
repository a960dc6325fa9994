"""``alkstore demo``: schedules, a worker and a transactional outbox, live on ``memory://``.

Three threads share one embedded store on the system clock:

* the scheduler leader loop (``Store.run_schedules``) fires two ``@every`` schedules onto a
  task queue;
* a worker (``alkstore.Worker``, with a plain handler for the task queue) runs each fired task,
  which writes an outbox message for it inside a transaction (``Store.outbox_enqueue_tx``);
* a courier delivers the outbox (``Outbox.run_once``) to three pretend destinations chosen
  by message number: ``email`` always works, ``webhook`` times out on a first attempt and
  works on the retry, ``crm`` is down and its messages are best effort
  (``EnqueueOpts(max_attempts=2)``), so they die after one retry on the 5 s curve.

Every event is printed as it happens, then a summary. Ctrl-C stops early; a second aborts.
With ``--web`` the demo also serves the dashboard over its store (found through the
``alkstore.dashboards`` entry point, so this module imports no web framework) and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib.metadata import entry_points
from typing import Any, TextIO

import alkstore
from alkstore import EnqueueOpts, Fire, Job, JobState, StopToken, Store, Worker

from ._args import seconds as seconds_argument
from ._exits import EXIT_ERROR, EXIT_OK
from ._signals import Interrupts

__all__ = ["DESTINATIONS", "OUTBOX", "SCHEDULES", "TASKS", "Demo", "add_commands", "run_demo"]

TASKS = "demo.tasks"
OUTBOX = "notifications"
SCHEDULES = (("heartbeat", "@every 2s"), ("report", "@every 3s"))
#: Message n goes to DESTINATIONS[(n - 1) % 3].
DESTINATIONS = ("email", "webhook", "crm")
_BEST_EFFORT = EnqueueOpts(max_attempts=2)

_CLAIM_WAIT_SECONDS = 0.1
_WORKER_GRACE_SECONDS = 5.0
_IDLE_POLL_SECONDS = 0.05
_MAIN_POLL_SECONDS = 0.05
_SUBJECT_WIDTH = 19

_COLORS = {
    "fire": "36",  # cyan
    "written": "2",  # dim
    "delivered": "32",  # green
    "retry": "33",  # yellow
    "dead": "31;1",  # bold red
    "leader": "35",  # magenta
    "warning": "31",  # red
    "stopping": "1",  # bold
}


class DeliveryFailed(Exception):
    """A pretend destination refused a message."""


def _deliver(destination: str, attempt: int) -> None:
    """The pretend destinations: deterministic by destination and attempt number."""
    if destination == "crm":
        raise DeliveryFailed("503 Service Unavailable")
    if destination == "webhook" and attempt == 1:
        raise DeliveryFailed("timed out after 2.0 s")


class _Console:
    """Aligned, timestamped event lines (relative to the start), safe to call from any thread."""

    def __init__(self, out: TextIO, start: datetime, clock: alkstore.Clock, color: bool) -> None:
        self._out = out
        self._start = start
        self._clock = clock
        self._color = color
        self._lock = threading.Lock()

    def at(self, instant: datetime) -> str:
        """``instant`` as seconds since the start, e.g. ``+8.02s``."""
        return f"+{(instant - self._start).total_seconds():.2f}s"

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self._color else text

    def line(self, text: str = "") -> None:
        with self._lock:
            print(text, file=self._out, flush=True)

    def event(self, kind: str, subject: str, detail: str) -> None:
        stamp = self.at(self._clock.now())
        label = self.paint(f"{kind:<9}", _COLORS.get(kind, "0"))
        self.line(f"{stamp:>9}  {label}  {subject:<{_SUBJECT_WIDTH}}  {detail}")


@dataclass(slots=True)
class _Message:
    seq: int
    job_id: int
    destination: str
    task_id: int


@dataclass(slots=True)
class _Attempt:
    job_id: int
    attempt: int
    max_attempts: int
    failed_at: datetime | None = None
    error: str | None = None


class _LeaderEvents(logging.Handler):
    """Shows the scheduler's own log records about its lease (and any warning) as demo events."""

    def __init__(self, console: _Console) -> None:
        super().__init__(logging.INFO)
        self._console = console

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            self._console.event("warning", "scheduler", message)
        elif "leadership" in message:
            self._console.event("leader", "scheduler", message)


class Demo:
    """One run of the demo over ``store``; ``run(seconds)`` returns the exit status."""

    def __init__(self, store: Store, out: TextIO, *, color: bool = False) -> None:
        self.store = store
        self.stop = StopToken()  # the worker and the courier
        self.stop_leader = StopToken()  # the scheduler: stopped last, so its lease release is the last event
        self.start = store.clock.now()
        self.console = _Console(out, self.start, store.clock, color)
        self.fires: Counter[str] = Counter()
        self.messages: dict[int, _Message] = {}
        self.delivered = 0
        self.retried = 0
        self.dead = 0
        self.failures: list[tuple[str, BaseException]] = []
        self._attempt: _Attempt | None = None

    # -- the three threads -------------------------------------------------------------

    def _on_fire(self, fire: Fire) -> None:
        self.fires[fire.schedule] += 1
        self.console.event("fire", fire.schedule, f"boundary {self.console.at(fire.boundary)}, task job {fire.job_id}")

    def _lead(self) -> None:
        self.store.run_schedules(self.stop_leader, on_fire=self._on_fire)

    def _work(self) -> None:
        worker = Worker(
            self.store,
            handlers={TASKS: self._handle},
            worker_id="worker-1",
            poll_interval=_CLAIM_WAIT_SECONDS,
            grace=_WORKER_GRACE_SECONDS,
        )
        worker.run(self.stop)

    def _handle(self, payload: Any, task: Job) -> None:
        """The transactional-outbox pattern: the message is written in the task's transaction."""
        seq = len(self.messages) + 1
        destination = DESTINATIONS[(seq - 1) % len(DESTINATIONS)]
        message = {
            "seq": seq,
            "to": destination,
            "schedule": task.schedule,
            "boundary": None if task.boundary is None else task.boundary.isoformat(),
        }
        opts = _BEST_EFFORT if destination == "crm" else None
        with self.store.transaction() as tx:
            job_id = self.store.outbox_enqueue_tx(tx, OUTBOX, message, opts)
        self.messages[job_id] = _Message(seq, job_id, destination, task.id)
        note = " (max_attempts=2)" if opts is not None else ""
        self.console.event(
            "written",
            f"msg #{seq} -> {destination}",
            f"outbox job {job_id}{note} in a transaction, by task {task.id}",
        )

    def _delivery(self, payload: Any, job: Job) -> None:
        attempt = self._attempt = _Attempt(job.id, job.attempts, job.max_attempts)
        try:
            _deliver(str(payload["to"]), job.attempts)
        except DeliveryFailed as exc:
            attempt.failed_at = self.store.clock.now()
            attempt.error = str(exc)
            raise

    def _courier(self) -> None:
        outbox = self.store.outbox(OUTBOX)
        while not self.stop.is_cancelled():
            self._attempt = None
            if outbox.run_once("courier-1", self._delivery):
                self._report_attempt()
            else:
                self.stop.wait(_IDLE_POLL_SECONDS)

    def _report_attempt(self) -> None:
        """Print what became of the attempt just made; ``get_job`` tells a retry from a death."""
        attempt = self._attempt
        if attempt is None:  # pragma: no cover - run_once always calls the delivery it was given
            return
        message = self.messages.get(attempt.job_id)
        subject = f"msg #{message.seq} -> {message.destination}" if message is not None else f"job {attempt.job_id}"
        tries = f"attempt {attempt.attempt}/{attempt.max_attempts}"
        if attempt.error is None:
            self.delivered += 1
            self.console.event("delivered", subject, tries)
            return
        info = self.store.get_job(attempt.job_id)
        if info is not None and info.state is JobState.DEAD:
            self.dead += 1
            self.console.event("dead", subject, f"{tries} failed: {info.last_error}; dead, no attempts left")
        elif info is not None and attempt.failed_at is not None:
            self.retried += 1
            delay = (info.run_at - attempt.failed_at).total_seconds()
            self.console.event(
                "retry",
                subject,
                f"{tries} failed: {attempt.error}; retry in {delay:.1f}s (at {self.console.at(info.run_at)})",
            )

    # -- running -------------------------------------------------------------------------

    def _guarded(self, name: str, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:
                self.failures.append((name, exc))
                self.stop.cancel()

        return run

    def _banner(self, seconds: float) -> None:
        c = self.console
        length = "until Ctrl-C" if seconds == float("inf") else f"{seconds:g} s"
        c.line(c.paint(f"alkstore demo: {length} on memory:// (the embedded engine), Ctrl-C stops early", "1"))
        c.line()
        for name, spec in SCHEDULES:
            c.line(f"  schedule   {name:<10} {spec:<10} fires a task onto {TASKS!r}")
        c.line(f"  worker     runs each task, which writes a message to outbox {OUTBOX!r} in a transaction")
        c.line("  courier    delivers the outbox by message number: email works; webhook times out on the")
        c.line("             first attempt; crm is down (best effort, 2 attempts: dead after one retry)")
        c.line()
        c.line(f"{'time':>9}  {'event':<9}  {'subject':<{_SUBJECT_WIDTH}}  detail")
        c.line(f"{'-' * 9}  {'-' * 9}  {'-' * _SUBJECT_WIDTH}  {'-' * 60}")

    def run(self, seconds: float) -> int:
        """Run for ``seconds`` (or until interrupted), print the summary, return the exit status."""
        self._banner(seconds)
        for name, spec in SCHEDULES:
            self.store.schedule(name, spec, TASKS, {"schedule": name})
        leader_log = logging.getLogger("alkstore.scheduler")
        events = _LeaderEvents(self.console)
        saved_level = leader_log.level
        leader_log.addHandler(events)
        leader_log.setLevel(logging.INFO)
        threads = [
            threading.Thread(target=self._guarded(name, body), name=f"alkstore-demo-{name}", daemon=True)
            for name, body in (("scheduler", self._lead), ("worker", self._work), ("courier", self._courier))
        ]
        try:
            with Interrupts((signal.SIGINT,)) as interrupts:
                for thread in threads:
                    thread.start()
                self._wait(seconds, interrupts)
                self.stop.cancel()
                for thread in threads[1:] + threads[:1]:  # the scheduler last
                    if thread is threads[0]:
                        self.stop_leader.cancel()
                    while thread.is_alive():
                        thread.join(_MAIN_POLL_SECONDS)
        finally:
            self.stop.cancel()
            self.stop_leader.cancel()
            leader_log.removeHandler(events)
            leader_log.setLevel(saved_level)
        self._summary()
        for name, exc in self.failures:
            print(f"alkstore: the demo's {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR if self.failures else EXIT_OK

    def _wait(self, seconds: float, interrupts: Interrupts) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.is_cancelled():
            if interrupts.count:
                self.console.event("stopping", "demo", "interrupted; stopping the threads (Ctrl-C again aborts)")
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(_MAIN_POLL_SECONDS, remaining))

    def _summary(self) -> None:
        c = self.console
        elapsed = (self.store.clock.now() - self.start) / timedelta(seconds=1)
        states: Counter[str] = Counter()
        for job_id in self.messages:
            info = self.store.get_job(job_id)
            states["delivered" if info is None else info.state.value] += 1
        pending = states[JobState.PENDING.value] + states[JobState.RUNNING.value]
        c.line()
        c.line(c.paint(f"summary after {elapsed:.1f} s", "1"))
        c.line()
        c.line(f"  {'schedule':<10}  {'spec':<10}  {'fires':>5}")
        for name, spec in SCHEDULES:
            c.line(f"  {name:<10}  {spec:<10}  {self.fires[name]:>5}")
        c.line()
        c.line(f"  outbox {OUTBOX!r}")
        rows = (
            ("messages written", len(self.messages)),
            ("delivered", self.delivered),
            ("retried", self.retried),
            ("dead", self.dead),
            ("still pending", pending),
        )
        for label, count in rows:
            c.line(f"    {label:<18} {count:>5}")
        c.line()


def _use_color(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


#: Where ``demo --web`` finds the dashboard: a context manager serving it over a sync store.
DASHBOARDS = "alkstore.dashboards"
_Serve = Callable[..., AbstractContextManager[str]]


def _dashboard() -> _Serve | None:
    found = list(entry_points(group=DASHBOARDS, name="web"))
    if not found:
        return None
    serve: _Serve = found[0].load()
    return serve


def run_demo(seconds: float, out: TextIO | None = None, *, web_port: int | None = None) -> int:
    """``alkstore demo``: run the demo for ``seconds`` on a fresh ``memory://`` store; with ``web_port``,
    serve the dashboard over that store on 127.0.0.1 meanwhile."""
    stream = sys.stdout if out is None else out
    with alkstore.open("memory://") as store:
        demo = Demo(store, stream, color=_use_color(stream))
        if web_port is None:
            return demo.run(seconds)
        serve = _dashboard()
        if serve is None:
            print("alkstore: demo --web needs the dashboard: pip install 'alkstore[web]'", file=sys.stderr)
            return EXIT_ERROR
        try:
            with serve(store, web_port) as url:
                print(
                    f"alkstore: the dashboard of this demo is at {url} (Ctrl-C stops both)", file=sys.stderr, flush=True
                )
                return demo.run(seconds)
        except (ImportError, OSError) as exc:
            print(f"alkstore: cannot serve the dashboard: {exc}", file=sys.stderr)
            return EXIT_ERROR


def add_commands(commands: Any) -> None:
    """Register ``demo`` on ``commands``."""
    demo = commands.add_parser(
        "demo",
        help="watch schedules, a worker and an outbox at work on the embedded engine",
        description="Run two @every schedules, a worker writing outbox messages in transactions, and an outbox "
        "delivery that fails for some messages, on memory:// with the system clock; then print a summary. "
        "Ctrl-C stops early (a second Ctrl-C aborts).",
    )
    demo.add_argument(
        "--seconds", type=seconds_argument, help="how long to run (default: 15; with --web, until Ctrl-C)"
    )
    demo.add_argument(
        "--web", action="store_true", help="also serve the dashboard over the demo's store (needs alkstore[web])"
    )
    demo.add_argument("--port", type=int, default=8080, help="the dashboard's port on 127.0.0.1 (default: 8080)")
    demo.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    seconds = args.seconds if args.seconds is not None else (float("inf") if args.web else 15.0)
    return run_demo(seconds, web_port=args.port if args.web else None)
