"""The Django tasks ``django_enqueue.py`` measures: module-level, as Django requires, imported once Django is set up."""

from __future__ import annotations

import threading

from django.tasks import task

#: Runs so far of ``noop`` (the drain waits for its block), under ``lock``.
runs = 0
lock = threading.Lock()


@task(queue_name="bench-django")  # type: ignore[untyped-decorator]  # Django ships no type hints
def noop(n: int) -> None:
    """Count the run, nothing else."""
    global runs
    with lock:
        runs += 1
