"""The test project's tasks: each leaves a trace in a file, so that a test can see it ran."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from django.tasks import task

from alkstore import current_job


@task
def write(path: str, text: str) -> str:
    """Write ``text`` to ``path``."""
    Path(path).write_text(text, encoding="utf-8")
    return text


@task(queue_name="emails", priority=50)
def send_email(to: str) -> None:
    """A task of another queue, with a priority of its own."""


@task(takes_context=True)
def write_context(context: Any, path: str) -> None:
    """Write what the ``TaskContext`` says (the result's id and the attempt) to ``path``."""
    Path(path).write_text(json.dumps({"id": context.task_result.id, "attempt": context.attempt}), encoding="utf-8")


@task
def slow_write(path: str, seconds: float) -> None:
    """Write ``started`` to ``path``, sleep ``seconds``, then write ``done``."""
    Path(path).write_text("started", encoding="utf-8")
    time.sleep(seconds)
    Path(path).write_text("done", encoding="utf-8")


@task
async def awrite(path: str, text: str) -> str:
    """``write`` as an ``async def``, awaited on the worker's event loop (it yields to the loop first)."""
    await asyncio.sleep(0)
    Path(path).write_text(f"{text} on {type(asyncio.get_running_loop()).__name__}", encoding="utf-8")
    return text


@task
def exits(path: str) -> None:
    """Write ``exiting`` to ``path``, then ``sys.exit(1)``: the run fails, the worker serves on."""
    Path(path).write_text("exiting", encoding="utf-8")
    sys.exit(1)


@task(queue_name="ticks")
def tick() -> None:
    """The periodic task (``OPTIONS["schedules"]``): a line per run, ``job-id boundary enqueued-at``, to
    ``$SHOP_TICK_LOG`` (when set)."""
    path = os.environ.get("SHOP_TICK_LOG")
    if path:
        job = current_job()
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{job.id} {job.boundary.isoformat()} {job.enqueued_at.isoformat()}\n")


class Boom(Exception):
    """What ``explode`` raises: an exception class of the project's own, named by its module path."""


@task(queue_name="results", takes_context=True)
def flaky(context: Any, failures: int) -> dict[str, Any]:
    """Fail the first ``failures`` attempts, then return what the last one was (a tuple: JSON makes it a list)."""
    if context.attempt <= failures:
        raise ValueError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "pair": (1, "two")}


@task(queue_name="results")
def explode(text: str) -> None:
    """Fail every attempt with ``Boom(text)``."""
    raise Boom(text)


@task(queue_name="results")
def returns_a_set() -> set[int]:
    """Return a value that is not JSON, which fails the run as it does on Django's own backends."""
    return {1, 2}


def not_a_task() -> None:
    """A plain function, which the worker refuses to run."""
