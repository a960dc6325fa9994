"""Receivers of Django's task signals that write each one, as a line, to ``$SHOP_SIGNAL_LOG`` (when set)."""

from __future__ import annotations

import os
from typing import Any

from django.dispatch import receiver
from django.tasks.signals import task_enqueued, task_finished, task_started


def _note(signal: str, task_result: Any) -> None:
    path = os.environ.get("SHOP_SIGNAL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{signal} {task_result.id} {task_result.task.name} {task_result.status}\n")


@receiver(task_enqueued)
def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _note("enqueued", task_result)


@receiver(task_started)
def on_started(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _note("started", task_result)


@receiver(task_finished)
def on_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _note("finished", task_result)
    path = os.environ.get("SHOP_SIGNAL_LOG")
    if path and task_result.errors:  # a failed run: a line naming its exception's class too
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"error {task_result.id} {task_result.errors[-1].exception_class_path}\n")
