"""The rule that a task's arguments bind to its function (ADR 055), on its own: no store, no I/O."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from alkstore import InvalidArgument, Tasks, check_arguments


def send_email(to: str, subject: str, body: str = "", *, urgent: bool = False, tag: str) -> None:
    """Required, defaulted and keyword-only arguments (one keyword-only without a default)."""


def pick(first: int, /, second: int = 0) -> None:
    """A positional-only argument: a worker, which calls with keywords, could never pass it."""


def anything(*args: Any, **kwargs: Any) -> None:
    """Takes any call."""


@pytest.mark.parametrize(
    ("args", "kwargs", "names"),
    [
        ((), {"to": "a", "tag": "t"}, "missing a required argument: 'subject'"),
        ((), {"to": "a", "subject": "s"}, "missing a required (keyword-only )?argument: 'tag'"),
        ((), {"to": "a", "subject": "s", "tag": "t", "cc": "b"}, "got an unexpected keyword argument 'cc'"),
        (("a", "s", "b", True), {"tag": "t"}, "too many positional arguments"),
        (("a",), {"to": "a", "subject": "s", "tag": "t"}, "multiple values for argument 'to'"),
    ],
)
def test_a_call_that_does_not_bind_is_refused_naming_the_task_and_the_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], names: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"^task 'mail:send' cannot be called with these arguments: {names}$"):
        check_arguments("mail:send", send_email, *args, **kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {"to": "a", "subject": "s", "tag": "t"}),  # the defaults fill the rest
        ((), {"to": "a", "subject": "s", "body": "b", "urgent": True, "tag": "t"}),
        (("a", "s"), {"tag": "t"}),  # positionally, as the Django backend's calls may be
    ],
)
def test_a_call_that_binds_is_accepted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    check_arguments("mail:send", send_email, *args, **kwargs)


def test_variadic_functions_take_any_call() -> None:
    check_arguments("any", anything)
    check_arguments("any", anything, 1, 2, x=3, task="a keyword named like the rule's own parameter")
    check_arguments("partial", functools.partial(send_email, "a", "s"), tag="t")


def test_a_positional_only_argument_cannot_be_given_by_keyword() -> None:
    with pytest.raises(InvalidArgument, match="'first' parameter is positional only"):
        check_arguments("pick", pick, first=1)
    check_arguments("pick", pick, 1, second=2)


def test_a_function_whose_signature_python_cannot_read_is_not_checked() -> None:
    check_arguments("int", int, "not", "checked", at="all")  # no signature: its runs tell


def test_a_task_enqueue_checks_its_call_before_it_looks_at_the_store() -> None:
    """The rule comes first: the store argument is not even looked at when the call cannot bind."""
    task = Tasks().task("send", queue="mail")(send_email)
    nowhere: Any = object()
    with pytest.raises(InvalidArgument, match=r"task 'send' .* 'subject'"):
        task.enqueue(nowhere, to="a", tag="t")  # type: ignore[call-arg]
    good = {"to": "a", "subject": "s", "tag": "t"}
    with pytest.raises(InvalidArgument, match=r"task 'send' .* 'cc'"):
        task.enqueue_many(nowhere, [good, {**good, "cc": "b"}, good])


def test_a_periodic_tasks_fixed_arguments_must_bind_when_it_is_registered() -> None:
    tasks = Tasks()
    with pytest.raises(InvalidArgument, match=r"task 'digest' .* 'subject'"):
        tasks.periodic("@every 1h", queue="mail", name="digest", kwargs={"to": "a", "tag": "t"})(send_email)
    assert "digest" not in tasks
    tasks.periodic("@every 1h", queue="mail", name="digest", kwargs={"to": "a", "subject": "s", "tag": "t"})(send_email)
    assert [periodic.task.name for periodic in tasks.periodic_tasks] == ["digest"]
