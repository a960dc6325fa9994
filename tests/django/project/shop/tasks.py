"""The test project's tasks: each leaves a trace in a file, so that a test can see it ran."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.tasks import task


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


def not_a_task() -> None:
    """A plain function, which the worker refuses to run."""
