"""A task's arguments bind to its function at enqueue (ADR 055), through every enqueue of a task.

A run that cannot bind (a required argument missing, an unexpected keyword) would fail every
attempt and end dead; each door refuses it with ``InvalidArgument`` naming the task and the
argument, before any I/O: nothing is written, a batch with one bad call writes none of its
calls, and the caller's transaction goes on as if the call had not been made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alkstore import InvalidArgument, Store, Task, Tasks
from contract_tests._runtimes import task_call
from tests.support import must_get

QUEUE = "mail"


def stored(store: Store) -> int:
    """How many jobs the queue holds, in any state."""
    return sum(s.ready + s.delayed + s.running + s.dead + s.waiting for s in store.queue_stats(QUEUE, cap=None))


def send_email_task() -> Task[..., None]:
    tasks = Tasks()

    @tasks.task("send_email", queue=QUEUE)
    def send_email(to: str, subject: str, body: str = "", *, urgent: bool = False) -> None:
        """A task with a required, a defaulted and a keyword-only argument."""

    return send_email


#: A call that binds.
GOOD: dict[str, Any] = {"to": "ada@example.com", "subject": "hi"}

#: A bad call, what its message names.
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "missing": ({"to": "ada@example.com"}, "missing a required argument: 'subject'"),
    "unexpected": (
        {"to": "ada@example.com", "subject": "hi", "cc": "bob@example.com"},
        "got an unexpected keyword argument 'cc'",
    ),
}

#: Each enqueue of a task, writing one call (the batches write it between two good ones).
DOORS: dict[str, Callable[[Store, Task[..., None], dict[str, Any]], object]] = {
    "enqueue": lambda store, task, call: task_call(task.enqueue, store, **call),
    "enqueue_tx": lambda store, task, call: _in_transaction(
        store, lambda tx: task_call(task.enqueue_tx, store, tx, **call)
    ),
    "enqueue_many": lambda store, task, call: task_call(task.enqueue_many, store, [GOOD, call, GOOD]),
    "enqueue_many_tx": lambda store, task, call: _in_transaction(
        store, lambda tx: task_call(task.enqueue_many_tx, store, tx, [GOOD, call, GOOD])
    ),
}


def _in_transaction(store: Store, call: Callable[[Any], object]) -> object:
    with store.transaction() as tx:
        return call(tx)


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("bad", BAD)
def test_a_call_that_does_not_bind_is_refused_naming_the_task_and_the_argument_and_nothing_is_written(
    store: Store, door: str, bad: str
) -> None:
    task = send_email_task()
    call, names = BAD[bad]
    with pytest.raises(InvalidArgument, match=rf"task 'send_email' cannot be called with these arguments: {names}"):
        DOORS[door](store, task, call)
    assert stored(store) == 0


@pytest.mark.parametrize("door", DOORS)
def test_calls_that_bind_are_written_defaults_and_keyword_only_arguments_included(store: Store, door: str) -> None:
    task = send_email_task()
    DOORS[door](store, task, {"to": "bob@example.com", "subject": "hi", "urgent": True})
    assert stored(store) == (3 if "many" in door else 1)


def test_a_refused_call_leaves_the_callers_transaction_as_it_was(store: Store) -> None:
    """The refusal comes before any statement, so the transaction is not aborted: what it wrote before and
    writes after commits."""
    task = send_email_task()
    with store.transaction() as tx:
        first = task_call(task.enqueue_tx, store, tx, **GOOD)
        with pytest.raises(InvalidArgument, match="'cc'"):
            task_call(task.enqueue_tx, store, tx, **BAD["unexpected"][0])
        with pytest.raises(InvalidArgument, match="'subject'"):
            task_call(task.enqueue_many_tx, store, tx, [GOOD, BAD["missing"][0]])
        second = task_call(task.enqueue_tx, store, tx, to="eve@example.com", subject="again")
    assert (must_get(store, first).payload, must_get(store, second).payload) == (
        GOOD,
        {"to": "eve@example.com", "subject": "again"},
    )
    assert stored(store) == 2


def test_a_task_taking_any_arguments_takes_any_call(store: Store) -> None:
    tasks = Tasks()
    anything = tasks.task("anything", queue=QUEUE)(lambda *args, **kwargs: None)
    task_call(anything.enqueue, store)
    task_call(anything.enqueue_many, store, [{"a": 1}, {"b": [2]}])
    assert stored(store) == 3
