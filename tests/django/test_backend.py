"""AlkstoreBackend as Django's task backend: enqueue in and out of the caller's transaction, the mapping, checks."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.test import override_settings

from alkstore import AsyncStore, InvalidArgument, JobState, StoreClosed
from alkstore.adapters.django.backend import AlkstoreBackend, database_url
from tests.django.project.shop.tasks import awrite, send_email, write, write_context

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django"]),
]

SHOP = "tests.django.project.shop.tasks"
WRITE = f"{SHOP}.write"


def backend() -> AlkstoreBackend:
    """The project's configured backend (this thread's instance)."""
    found = task_backends["default"]
    assert isinstance(found, AlkstoreBackend)
    return found


def stored(result: Any) -> Any:
    """The stored job of a result, as the backend's own store sees it (``None``: there is none)."""
    return backend().store.get_job(int(result.id))


def test_a_job_enqueued_inside_atomic_is_gone_when_the_transaction_rolls_back(tmp_path: Path) -> None:
    results = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            results.append(write.enqueue(path=str(tmp_path / "out"), text="never"))
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert stored(results[0]) is None


def jobs_of(queue: str) -> int:
    """How many jobs ``queue`` holds, in any state (the alkstore schema outlives a test: compare, not count)."""
    counts = backend().store.queue_stats(queue, cap=None)
    return sum(each.ready + each.delayed + each.running + each.dead + each.waiting for each in counts)


#: Calls of the project's tasks that cannot bind, and what the refusal names (``write_context`` is given its
#: ``TaskContext`` by the worker, so its caller's first argument is its second parameter).
UNBOUND = {
    "missing": (write, ("p",), {}, "missing a required argument: 'text'"),
    "unexpected": (write, (), {"path": "p", "text": "t", "cc": "x"}, "got an unexpected keyword argument 'cc'"),
    "positional": (write, ("p", "t", "x"), {}, "too many positional arguments"),
    "context": (write_context, ("p", "x"), {}, "too many positional arguments"),
}


def _in_atomic(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with transaction.atomic():
        return task.enqueue(*args, **kwargs)


#: The ways a Django task is enqueued: alone, from async code, in the caller's transaction.
ENQUEUES = {
    "enqueue": lambda task, args, kwargs: task.enqueue(*args, **kwargs),
    "aenqueue": lambda task, args, kwargs: async_to_sync(task.aenqueue)(*args, **kwargs),
    "enqueue in atomic": _in_atomic,
}


@pytest.mark.parametrize("call", UNBOUND)
@pytest.mark.parametrize("how", ENQUEUES)
def test_a_call_that_does_not_bind_is_refused_before_anything_is_stored(call: str, how: str) -> None:
    task, args, kwargs, names = UNBOUND[call]
    message = rf"^task '{task.module_path}' cannot be called with these arguments: {names}$"
    before = jobs_of("default")
    with pytest.raises(InvalidArgument, match=message):  # a TypeError, as calling the function would raise
        ENQUEUES[how](task, args, kwargs)
    assert jobs_of("default") == before


def test_a_refused_call_leaves_the_atomic_block_it_was_made_in_as_it_was(tmp_path: Path) -> None:
    jobs = jobs_of("default")
    with transaction.atomic():
        before = write.enqueue(path=str(tmp_path / "a"), text="kept")
        with pytest.raises(TypeError):
            write.enqueue(path=str(tmp_path / "b"))
        after = write_context.enqueue(str(tmp_path / "c"))  # its context is the worker's to give
    assert stored(before).state is stored(after).state is JobState.PENDING
    assert stored(after).payload == {"args": [str(tmp_path / "c")], "kwargs": {}}
    assert jobs_of("default") == jobs + 2


def test_a_job_enqueued_inside_atomic_is_stored_when_the_transaction_commits_and_not_before(tmp_path: Path) -> None:
    with transaction.atomic():
        result = write.enqueue(path=str(tmp_path / "out"), text="later")
        assert stored(result) is None  # another connection cannot see it yet
    assert stored(result).state is JobState.PENDING


def test_a_job_enqueued_in_a_nested_atomic_that_rolls_back_is_gone_with_its_savepoint(tmp_path: Path) -> None:
    dropped = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            dropped.append(write.enqueue(path=str(tmp_path / "b"), text="dropped"))
            raise RuntimeError("roll back the savepoint")

    with transaction.atomic():
        kept = write.enqueue(path=str(tmp_path / "a"), text="kept")
        with pytest.raises(RuntimeError):
            enqueue_then_fail()
    assert stored(kept) is not None
    assert stored(dropped[0]) is None


def test_a_job_enqueued_outside_atomic_is_committed_on_its_own(tmp_path: Path) -> None:
    result = write.enqueue(path=str(tmp_path / "out"), text="now")
    assert stored(result).state is JobState.PENDING


def test_a_job_enqueued_with_autocommit_turned_off_rolls_back_with_the_connection(tmp_path: Path) -> None:
    transaction.set_autocommit(False)
    try:
        result = write.enqueue(path=str(tmp_path / "out"), text="manual")
        assert stored(result) is None
        transaction.rollback()
    finally:
        transaction.set_autocommit(True)
    assert stored(result) is None


def test_aenqueue_outside_a_transaction_writes_on_the_loops_async_store_and_commits_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("aenqueue outside a transaction went through the sync enqueue")

    monkeypatch.setattr(AlkstoreBackend, "enqueue", refuse)
    result = async_to_sync(write.aenqueue)(path=str(tmp_path / "out"), text="async")
    assert stored(result).payload == {"args": [], "kwargs": {"path": str(tmp_path / "out"), "text": "async"}}
    assert stored(result).task == WRITE


def test_aenqueue_from_async_code_run_inside_atomic_is_written_in_that_transaction(tmp_path: Path) -> None:
    results = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            results.append(async_to_sync(write.aenqueue)(path=str(tmp_path / "out"), text="never"))
            assert stored(results[0]) is None  # not committed on its own
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert stored(results[0]) is None
    with transaction.atomic():
        kept = async_to_sync(write.aenqueue)(path=str(tmp_path / "out"), text="kept")
    assert stored(kept).state is JobState.PENDING


def test_the_async_store_of_a_loop_is_closed_when_the_loop_shuts_down(tmp_path: Path) -> None:
    async def enqueue() -> AsyncStore:
        await write.aenqueue(path=str(tmp_path / "out"), text="x")
        store = await backend().astore()
        assert await backend().astore() is store  # one per loop
        return store

    store = asyncio.run(enqueue())
    with pytest.raises(StoreClosed):
        asyncio.run(store.get_job(1))


def test_aenqueue_sends_task_enqueued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "signals"
    monkeypatch.setenv("SHOP_SIGNAL_LOG", str(log))
    result = async_to_sync(awrite.aenqueue)(path=str(tmp_path / "out"), text="x")
    assert log.read_text(encoding="utf-8") == f"enqueued {result.id} awrite READY\n"


def test_the_job_names_the_task_by_module_path_and_carries_its_args_and_kwargs_as_json(tmp_path: Path) -> None:
    result = write.enqueue(str(tmp_path / "out"), text="hello")
    info = stored(result)
    assert (info.task, info.queue) == (WRITE, "default")
    assert info.payload == {"args": [str(tmp_path / "out")], "kwargs": {"text": "hello"}}
    assert result.status == TaskResultStatus.READY
    assert result.id == str(info.id)
    assert result.enqueued_at is not None


def test_the_queue_name_is_the_alkstore_queue() -> None:
    assert stored(send_email.enqueue(to="a@example.com")).queue == "emails"


def test_the_flags_say_what_the_backend_does() -> None:
    configured = backend()
    assert (configured.supports_defer, configured.supports_priority) == (True, True)
    assert (configured.supports_get_result, configured.supports_async_task) == (True, True)


def test_django_priorities_are_kept_as_alkstore_priorities_and_claimed_highest_first() -> None:
    priorities = [0, -100, 100, 50, -1]
    ids = [int(send_email.using(priority=p).enqueue(to=f"{p}@example.com").id) for p in priorities]
    assert [stored_priority(job_id) for job_id in ids] == priorities
    claimed = backend().store.queue("emails").claim_many("priority-test", 100)
    for job in claimed:
        job.ack()
    ours = [job.id for job in claimed if job.id in ids]
    assert ours == [ids[priorities.index(p)] for p in sorted(priorities, reverse=True)]


def stored_priority(job_id: int) -> int:
    info = backend().store.get_job(job_id)
    assert info is not None
    return int(info.priority)


def test_run_after_becomes_the_jobs_run_at() -> None:
    run_after = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=3)
    result = send_email.using(run_after=run_after).enqueue(to="later@example.com")
    assert stored(result).run_at == run_after


def test_a_queue_not_in_queues_is_an_invalid_task() -> None:
    with pytest.raises(InvalidTask, match="elsewhere"):
        write.using(queue_name="elsewhere")


def test_an_async_task_is_a_valid_task_enqueued_like_any_other(tmp_path: Path) -> None:
    result = awrite.enqueue(path=str(tmp_path / "out"), text="x")
    assert stored(result).task == "tests.django.project.shop.tasks.awrite"


def test_the_task_enqueued_signal_is_sent_with_the_stored_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "signals"
    monkeypatch.setenv("SHOP_SIGNAL_LOG", str(log))
    result = write.enqueue(path=str(tmp_path / "out"), text="x")
    assert log.read_text(encoding="utf-8") == f"enqueued {result.id} write READY\n"


def test_get_result_answers_a_pending_job_as_ready_with_its_arguments(tmp_path: Path) -> None:
    result = write.enqueue(path=str(tmp_path / "out"), text="x")
    found = write.get_result(result.id)
    assert (found.id, found.status, found.kwargs) == (result.id, TaskResultStatus.READY, result.kwargs)
    assert found.task.module_path == WRITE


@pytest.mark.parametrize("result_id", ["999999999999", "not-a-number", ""])
def test_get_result_of_an_id_that_is_no_stored_job_raises_task_result_does_not_exist(result_id: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        backend().get_result(result_id)


def backend_with(**params: Any) -> AlkstoreBackend:
    return AlkstoreBackend("checked", {"QUEUES": ["default"], **params})


def error_ids(backend: AlkstoreBackend) -> list[str]:
    return [error.id for error in backend.check()]


def test_a_well_configured_backend_passes_its_checks() -> None:
    assert error_ids(backend()) == []


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"OPTIONS": {"databse": "default"}}, "alkstore.E001"),
        ({"OPTIONS": {"database": "nowhere"}}, "alkstore.E002"),
        ({"OPTIONS": {"schema": "Bad Schema"}}, "alkstore.E004"),
        ({"OPTIONS": {"max_size": 0}}, "alkstore.E005"),
        ({"QUEUES": [" padded"]}, "alkstore.E006"),
        ({"OPTIONS": {"schedules": {WRITE: "every day"}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {f"{SHOP}.not_a_task": "@every 1m"}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {f"{SHOP}.nowhere": "@every 1m"}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {f"{SHOP}.tick": "@every 1m"}}}, "alkstore.E007"),  # its queue is not in QUEUES
        ({"OPTIONS": {"schedules": {WRITE: {"every": "@every 1m", "kwargs": {"path": object()}}}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {WRITE: {"every": "@every 1m", "when": "now"}}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": [WRITE]}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {WRITE: {"every": "@every 1m", "kwargs": {"path": "p"}}}}}, "alkstore.E007"),
        ({"OPTIONS": {"schedules": {f"{SHOP}.send_email": "@every 1d"}}}, "alkstore.E007"),  # it needs a `to`
    ],
)
def test_a_misconfigured_backend_fails_its_checks_with_a_hint(params: dict[str, Any], expected: str) -> None:
    errors = backend_with(**params).check()
    assert [error.id for error in errors] == [expected]
    assert errors[0].hint


def test_the_schedules_are_read_as_task_spec_args_and_kwargs_by_module_path() -> None:
    configured = backend_with(
        OPTIONS={
            "schedules": {
                WRITE: {"every": "@every 1h", "args": ["p"], "kwargs": {"text": "t"}},
                f"{SHOP}.send_email": {"every": "@every 1d", "kwargs": {"to": "ops@example.com"}},
            }
        },
        QUEUES=["default", "emails"],
    )
    assert error_ids(configured) == []
    assert configured.periodic() == {
        WRITE: (write, "@every 1h", ["p"], {"text": "t"}),
        f"{SHOP}.send_email": (send_email, "@every 1d", [], {"to": "ops@example.com"}),
    }


def test_a_schedule_whose_arguments_do_not_bind_names_the_task_and_the_argument() -> None:
    (error,) = backend_with(OPTIONS={"schedules": {WRITE: {"every": "@every 1m", "args": ["p", "t", "x"]}}}).check()
    assert error.id == "alkstore.E007"
    assert f"task '{WRITE}' cannot be called with these arguments: too many positional arguments" in error.msg


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_a_database_neither_postgresql_nor_a_sqlite_file_fails_the_checks(tmp_path: Path) -> None:
    """A SQLite database in memory is refused (a worker could not open it); one in a file is served, its
    store at the file's ``sqlite:///`` URL (tests/django/test_sqlite_project.py runs a project on one)."""
    (in_memory,) = backend_with(OPTIONS={"database": "lite"}).check()
    assert (in_memory.id, "in memory" in in_memory.msg) == ("alkstore.E003", True)
    oracle = {"ENGINE": "django.db.backends.oracle", "NAME": "shop"}
    in_a_file = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "shop db.sqlite3")}
    with override_settings(DATABASES={**settings.DATABASES, "oracle": oracle, "file": in_a_file}):
        assert error_ids(backend_with(OPTIONS={"database": "oracle"})) == ["alkstore.E003"]
        served = backend_with(OPTIONS={"database": "file"})
        assert error_ids(served) == []
        assert served._key()[0] == f"sqlite:///{tmp_path}/shop%20db.sqlite3"


def test_a_misconfigured_backend_refuses_to_enqueue() -> None:
    with pytest.raises(InvalidTask, match="misconfigured"):
        backend_with(OPTIONS={"database": "nowhere"}).enqueue(write, (), {"path": "p", "text": "t"})
    with pytest.raises(InvalidTask, match="misconfigured"):
        async_to_sync(backend_with(OPTIONS={"database": "nowhere"}).aenqueue)(write, (), {"path": "p", "text": "t"})


def test_the_url_is_built_from_the_django_database_settings() -> None:
    settings = {
        "NAME": "shop db",
        "USER": "app",
        "PASSWORD": "p@ss",
        "HOST": "db.internal",
        "PORT": "6432",
        "OPTIONS": {"sslmode": "require", "isolation_level": 1, "pool": True},
    }
    assert database_url(settings) == "postgresql://app:p%40ss@db.internal:6432/shop%20db?sslmode=require"


def test_a_unix_socket_host_goes_into_the_query_string() -> None:
    assert database_url({"NAME": "d", "USER": "u", "HOST": "/run/pg"}) == "postgresql://u@/d?host=%2Frun%2Fpg"


def test_the_scratch_schema_is_the_one_configured() -> None:
    assert backend().schema == os.environ["ALKSTORE_DJANGO_SCHEMA"]


def changed_databases(**default: Any) -> Any:
    """``override_settings`` of ``DATABASES`` with ``default`` changed as given (``None``: without it); Django
    warns that overriding them is unusual, which here is the point."""
    databases = {alias: dict(entry) for alias, entry in settings.DATABASES.items()}
    if default.pop("gone", False):
        del databases["default"]
    else:
        databases["default"].update(default)
    return override_settings(DATABASES=databases)


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_the_store_follows_the_database_settings_when_they_change(tmp_path: Path) -> None:
    before = backend().store
    write.enqueue(path=str(tmp_path / "out"), text="before")
    options = {**settings.DATABASES["default"].get("OPTIONS", {}), "application_name": "alkstore-changed"}
    with changed_databases(OPTIONS=options):
        assert backend().store is not before
        assert "application_name=alkstore-changed" in backend()._key()[0]
    assert backend().store is before


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_a_backend_whose_database_is_gone_from_the_settings_refuses_to_enqueue(tmp_path: Path) -> None:
    write.enqueue(path=str(tmp_path / "out"), text="before")
    with changed_databases(gone=True), pytest.raises(InvalidTask, match="misconfigured"):
        write.enqueue(path=str(tmp_path / "out"), text="after")
