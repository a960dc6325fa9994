"""How alkstore's jobs read as Django's ``TaskResult``: a stored job (ready, running, dead) and a kept
result (successful), with their errors and worker ids (ADR 046)."""

from __future__ import annotations

import re
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.utils.dateparse import parse_datetime

from alkstore import JobInfo, JobResult, JobState

__all__ = ["kept_result_of", "result_of", "run_after_of", "task_error"]


def result_of(task: Any, info: JobInfo, backend: str) -> Any:
    """The ``TaskResult`` of a stored job of a Django task: ready, running, or failed for good (dead).

    Its errors are its failed attempts, one each, as its queue logs them when it keeps results
    (ADR 064), each with its worker and start: ``started_at`` is the first attempt's,
    ``last_attempted_at`` the latest one's (a running job's: its claim's). A dead job whose log lacks
    its last failure (a lapsed last lease; a row from before ADR 064) gets that from its row.
    """
    payload = info.payload if isinstance(info.payload, dict) else {}
    status = {
        JobState.PENDING: TaskResultStatus.READY,
        JobState.RUNNING: TaskResultStatus.RUNNING,
        JobState.DEAD: TaskResultStatus.FAILED,
    }[info.state]
    logged = list(info.errors)
    errors = [task_error(failed.error, failed.traceback, failed.exception) for failed in logged]
    workers = [failed.worker_id or "" for failed in logged]
    if info.state is JobState.DEAD and info.last_error is not None and len(logged) < info.attempts:
        errors.append(task_error(info.last_error, info.last_traceback))
        workers.append("")
    if info.state is JobState.RUNNING:
        workers.append(info.worker_id or "")
    starts = [failed.started_at for failed in logged if failed.started_at is not None]
    if info.state is JobState.RUNNING and info.claimed_at is not None:
        starts.append(info.claimed_at)  # the attempt now running
    return TaskResult(
        task=task,
        id=str(info.id),
        status=status,
        enqueued_at=info.enqueued_at,
        started_at=starts[0] if starts else None,
        last_attempted_at=starts[-1] if starts else None,
        finished_at=info.died_at,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=backend,
        errors=errors,
        worker_ids=_worker_ids(workers, info.attempts),
    )


def kept_result_of(task: Any, kept: JobResult, backend: str) -> Any:
    """The ``SUCCESSFUL`` ``TaskResult`` of a Django task's kept result: its return value, the errors
    of its earlier attempts and one worker id per attempt (ADR 046); ``started_at`` its first attempt's
    start, ``last_attempted_at`` its last one's (ADR 064)."""
    payload = kept.payload if isinstance(kept.payload, dict) else {}
    starts = [failed.started_at for failed in kept.errors if failed.started_at is not None]
    result = TaskResult(
        task=task,
        id=str(kept.id),
        status=TaskResultStatus.SUCCESSFUL,
        enqueued_at=kept.enqueued_at,
        started_at=starts[0] if starts else kept.started_at,
        last_attempted_at=kept.started_at,
        finished_at=kept.finished_at,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=backend,
        errors=[task_error(failed.error, failed.traceback, failed.exception) for failed in kept.errors],
        worker_ids=_worker_ids(
            [failed.worker_id or "" for failed in kept.errors] + [kept.worker_id or ""], kept.attempts
        ),
    )
    object.__setattr__(result, "_return_value", kept.result)
    return result


def run_after_of(payload: Any) -> Any:
    """The ``run_after`` a Django task's job was enqueued with (its payload keeps it), else ``None``."""
    text = payload.get("run_after") if isinstance(payload, dict) else None
    return parse_datetime(text) if isinstance(text, str) else None


def _worker_ids(known: list[str], attempts: int) -> list[str]:
    """One worker id per attempt (Django counts ``attempts`` by them): those known, the latest last, led
    by ``""`` for each attempt whose worker is not known (a lease that lapsed)."""
    return [""] * (attempts - len(known)) + known[-attempts:] if attempts else []


#: The line of a formatted traceback that names the exception raised: its type, then its message.
_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::|$)")


def task_error(error: str, traceback: str | None, exception: str | None = None) -> TaskError:
    """A Django ``TaskError`` for a failed attempt: its exception's class path and its traceback.

    A dead job's row keeps its traceback but not the class path, so that is read from the
    traceback's line naming the exception (``traceback`` prints builtins without their module);
    ``builtins.Exception`` when neither says (an error given as text), with the text as traceback.
    """
    if exception is None and traceback:
        tail = traceback.rsplit("Traceback (most recent call last):\n", 1)[-1]
        named = next((m for line in tail.splitlines() if (m := _RAISED.match(line))), None)
        if named is not None:
            kind = named["type"]
            exception = kind if "." in kind else f"builtins.{kind}"
    return TaskError(exception_class_path=exception or "builtins.Exception", traceback=traceback or error)
