"""Bad input is refused at every entry point, with the documented error, before anything is stored.

Every name-bearing argument is checked (a schedule's target queue too), as are specs,
payloads and options. "Before anything is stored" is shown twice: on an open store nothing
is left behind, and on a closed store the input error wins over ``StoreClosed`` — the input
was judged before the engine was touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alkstore import (
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    InvalidSpec,
    ManualClock,
    ReservedName,
    ScheduleOpts,
    Store,
)
from tests.support import must_claim, must_get

from ._checks import committed
from ._runners import cancelled

NOT_A_TX = object()
PAYLOAD = {"order": 17}


#: Every public entry point that takes a user name, called with ``name`` in that position.
NAME_ENTRY_POINTS: dict[str, Callable[[Store, Any], object]] = {
    "queue": lambda store, name: store.queue(name),
    "outbox": lambda store, name: store.outbox(name),
    "schedule name": lambda store, name: store.schedule(name, "@every 1m", "jobs"),
    "schedule target queue": lambda store, name: store.schedule("nightly", "@every 1m", name),
    "try_lock": lambda store, name: store.try_lock(name, "owner-1", 30),
    "enqueue_tx": lambda store, name: committed(store, lambda tx: store.enqueue_tx(tx, name, PAYLOAD)),
    "outbox_enqueue_tx": lambda store, name: committed(store, lambda tx: store.outbox_enqueue_tx(tx, name, PAYLOAD)),
    "unschedule": lambda store, name: store.unschedule(name),
}
#: The same entry points without a transaction, for a closed store (which cannot open one).
CLOSED_NAME_ENTRY_POINTS: dict[str, Callable[[Store, Any], object]] = {
    **NAME_ENTRY_POINTS,
    "enqueue_tx": lambda store, name: store.enqueue_tx(NOT_A_TX, name, PAYLOAD),
    "outbox_enqueue_tx": lambda store, name: store.outbox_enqueue_tx(NOT_A_TX, name, PAYLOAD),
}

MALFORMED_NAMES = ["", " leading", "trailing ", "x" * 129, "tab\there", "new\nline", "nul\x00", 42, None]
RESERVED_NAMES = ["__alkstore_x", "__alkstore_scheduler", "__alkstore_outbox:mail"]
EDGE_NAMES = ["x" * 128, "é" * 128, "café ☕ jobs", "inner space", "__alkstore", "_alkstore_x", "a"]


def assert_nothing_stored(store: Store) -> None:
    """No schedule, no outbox message, no queued job under the probed names, and the scheduler lease free."""
    assert store.schedules() == []
    assert store.outbox("mail").run_once("probe", lambda payload, job: None) is False
    for queue in ("jobs", "nightly"):
        assert store.queue(queue).claim("probe") is None
    store.run_schedules(cancelled())  # leads (the lease is free) and returns; refused would raise


def not_refused(error: type[Exception], cases: Iterable[Any], call: Callable[[Any], object]) -> list[str]:
    """Each case for which ``call(case)`` did not raise ``error``, with what it did instead."""
    wrong = []
    for case in cases:
        try:
            call(case)
        except error:
            continue
        except Exception as exc:
            wrong.append(f"{case!r}: {type(exc).__name__}: {exc}")
        else:
            wrong.append(f"{case!r}: accepted")
    return wrong


@pytest.mark.parametrize("entry", NAME_ENTRY_POINTS)
def test_a_malformed_name_is_invalid_at_every_entry_point(store: Store, entry: str) -> None:
    assert not_refused(InvalidName, MALFORMED_NAMES, lambda name: NAME_ENTRY_POINTS[entry](store, name)) == []
    assert_nothing_stored(store)


@pytest.mark.parametrize("entry", NAME_ENTRY_POINTS)
def test_a_reserved_name_is_refused_at_every_entry_point(store: Store, entry: str) -> None:
    assert not_refused(ReservedName, RESERVED_NAMES, lambda name: NAME_ENTRY_POINTS[entry](store, name)) == []
    assert_nothing_stored(store)


def test_names_are_judged_before_the_engine_is_touched(store: Store) -> None:
    store.close()
    for error, name in ((InvalidName, ""), (ReservedName, "__alkstore_x")):

        def call(entry: str, name: str = name) -> object:
            return CLOSED_NAME_ENTRY_POINTS[entry](store, name)

        assert not_refused(error, CLOSED_NAME_ENTRY_POINTS, call) == [], f"{name!r} on a closed store"


def _round_trip_every_entry_point(store: Store, name: str) -> None:
    job_id = store.queue(name).enqueue(PAYLOAD)
    claimed = must_claim(store.queue(name))
    assert (claimed.id, claimed.queue) == (job_id, name)
    claimed.ack()

    tx_id = committed(store, lambda tx: store.enqueue_tx(tx, name, PAYLOAD))
    assert isinstance(tx_id, int)
    tx_job = must_get(store, tx_id)
    assert tx_job.queue == name

    delivered: list[object] = []
    outbox = store.outbox(name)
    assert outbox.name == name
    outbox.enqueue("direct")
    committed(store, lambda tx: store.outbox_enqueue_tx(tx, name, "in-tx"))
    while outbox.run_once("w", lambda payload, job: delivered.append(payload)):
        pass
    assert delivered == ["direct", "in-tx"]

    stored = store.schedule(name, "@every 1m", name)
    assert (stored.name, stored.queue) == (name, name)
    assert [(s.name, s.queue) for s in store.schedules()] == [(name, name)]
    assert store.unschedule(name) is True

    lock = store.try_lock(name, name, 30)
    assert lock is not None
    assert (lock.name, lock.owner) == (name, name)


def test_names_at_the_edges_of_the_rule_are_accepted_and_read_back_everywhere(store: Store) -> None:
    for name in EDGE_NAMES:
        try:
            _round_trip_every_entry_point(store, name)
        except AssertionError as exc:
            raise AssertionError(f"name {name!r}: {exc}") from exc


def test_a_malformed_worker_id_or_lock_owner_is_invalid(store: Store) -> None:
    labels = ["", " padded ", "x" * 129, "new\nline", 7]
    store.queue("jobs").enqueue(PAYLOAD)
    assert not_refused(InvalidName, labels, lambda label: store.queue("jobs").claim(label)) == []
    assert not_refused(InvalidName, labels, lambda label: store.outbox("mail").run_once(label, lambda p, j: None)) == []
    assert not_refused(InvalidName, labels, lambda label: store.try_lock("resource", label, 30)) == []
    job = must_claim(store.queue("jobs"))
    assert job.attempts == 1  # the refused claims took nothing
    assert store.try_lock("resource", "someone", 30) is not None


# -- specs -------------------------------------------------------------------------------

BAD_SPECS = [
    "*/5 * * * *",
    "0 0 * * *",
    "0 0 * * * *",
    "@hourly",
    "@daily",
    "@every",
    "@every 5",
    "@every 0s",
    "@every -5s",
    "@every 5x",
    "@every 5 s",
    "@every  5s",
    " @every 5s",
    "@every 5s ",
    "@EVERY 5s",
    "@every 5S",
    "@every 05s",
    "@every 1.5h",
    "@every 1h30m",
    "every 5s",
    "@every 3651d",
    "@every 315360001s",
    "@every 5s\n",
    "",
    5,
    None,
]
GOOD_SPECS = [
    ("@every 1s", 1),
    ("@every 90s", 90),
    ("@every 59m", 59 * 60),
    ("@every 25h", 25 * 3600),
    ("@every 7d", 7 * 86400),
    ("@every 3650d", 3650 * 86400),
    ("@every 315360000s", 3650 * 86400),
]


def test_anything_but_every_n_unit_is_an_invalid_spec_and_nothing_is_stored(store: Store) -> None:
    assert not_refused(InvalidSpec, BAD_SPECS, lambda spec: store.schedule("nightly", spec, "jobs")) == []
    assert_nothing_stored(store)


def test_a_bad_spec_does_not_touch_an_existing_schedule(store: Store, clock: ManualClock) -> None:
    before = store.schedule("nightly", "@every 1h", "jobs")
    clock.advance(30)
    with pytest.raises(InvalidSpec, match=r"\(cron expressions are not supported: .* ScheduleOpts\(anchor=.*\)$"):
        store.schedule("nightly", "0 * * * *", "other")
    assert store.schedules() == [before]


def test_a_spec_is_judged_before_the_engine_is_touched(store: Store) -> None:
    store.close()
    with pytest.raises(InvalidSpec):
        store.schedule("nightly", "@hourly", "jobs")


def test_every_n_unit_specs_are_stored_as_written(store: Store, clock: ManualClock) -> None:
    for index, (spec, seconds) in enumerate(GOOD_SPECS):
        stored = store.schedule(f"s{index}", spec, "jobs")
        assert stored.spec == spec
        assert stored.interval == timedelta(seconds=seconds)
        assert stored.next_boundary == clock.now() + timedelta(seconds=seconds)
    assert [(s.spec, s.interval) for s in store.schedules()] == [(spec, timedelta(seconds=n)) for spec, n in GOOD_SPECS]


# -- payloads ------------------------------------------------------------------------------

BAD_PAYLOADS = [object(), {1, 2}, float("nan"), float("inf"), {"nested": object()}, {1j: "complex key"}, "\ud800"]


def _payload_entry_points(store: Store) -> dict[str, Callable[[Any], object]]:
    return {
        "queue.enqueue": lambda payload: store.queue("jobs").enqueue(payload),
        "outbox.enqueue": lambda payload: store.outbox("mail").enqueue(payload),
        "schedule": lambda payload: store.schedule("nightly", "@every 1m", "jobs", payload),
        "enqueue_tx": lambda payload: committed(store, lambda tx: store.enqueue_tx(tx, "jobs", payload)),
        "outbox_enqueue_tx": lambda payload: committed(store, lambda tx: store.outbox_enqueue_tx(tx, "mail", payload)),
    }


@pytest.mark.parametrize("entry", ["queue.enqueue", "outbox.enqueue", "schedule", "enqueue_tx", "outbox_enqueue_tx"])
def test_an_unencodable_payload_is_refused_and_nothing_is_stored(store: Store, entry: str) -> None:
    assert not_refused(InvalidPayload, BAD_PAYLOADS, _payload_entry_points(store)[entry]) == []
    assert_nothing_stored(store)


def test_a_payload_is_judged_before_the_engine_is_touched(store: Store) -> None:
    queue, outbox = store.queue("jobs"), store.outbox("mail")
    store.close()
    calls: dict[str, Callable[[], object]] = {
        "queue.enqueue": lambda: queue.enqueue(object()),
        "outbox.enqueue": lambda: outbox.enqueue(object()),
        "schedule": lambda: store.schedule("nightly", "@every 1m", "jobs", object()),
        "enqueue_tx": lambda: store.enqueue_tx(NOT_A_TX, "jobs", object()),
        "outbox_enqueue_tx": lambda: store.outbox_enqueue_tx(NOT_A_TX, "mail", object()),
    }
    assert not_refused(InvalidPayload, calls, lambda name: calls[name]()) == []


# -- options -------------------------------------------------------------------------------

LATER = datetime(2040, 1, 1, tzinfo=UTC)

BAD_ENQUEUE_OPTS: dict[str, Callable[[], object]] = {
    "negative delay": lambda: EnqueueOpts(delay=-1),
    "delay and run_at": lambda: EnqueueOpts(delay=1, run_at=LATER),
    "naive run_at": lambda: EnqueueOpts(run_at=datetime(2040, 1, 1)),
    "priority above int32": lambda: EnqueueOpts(priority=2**31),
    "priority below int32": lambda: EnqueueOpts(priority=-(2**31) - 1),
    "zero max_attempts": lambda: EnqueueOpts(max_attempts=0),
    "bool max_attempts": lambda: EnqueueOpts(max_attempts=True),
    "zero expires": lambda: EnqueueOpts(expires=0),
    "infinite delay": lambda: EnqueueOpts(delay=float("inf")),
    "a century and a day of delay": lambda: EnqueueOpts(delay=timedelta(days=36501)),
    "expires before the delay ends": lambda: EnqueueOpts(delay=20, expires=10),
    "expires before run_at": lambda: EnqueueOpts(run_at=LATER, expires=LATER - timedelta(seconds=1)),
    "expires exactly at run_at": lambda: EnqueueOpts(run_at=LATER, expires=LATER),
    "schedule options": lambda: ScheduleOpts(),
    "a dict": lambda: {"priority": 1},
}


def test_bad_enqueue_options_are_refused_and_nothing_is_stored(store: Store) -> None:
    enqueues: dict[str, Callable[[Any], object]] = {
        "queue.enqueue": lambda make: store.queue("jobs").enqueue(PAYLOAD, make()),
        "outbox.enqueue": lambda make: store.outbox("mail").enqueue(PAYLOAD, make()),
        "enqueue_tx": lambda make: committed(store, lambda tx: store.enqueue_tx(tx, "jobs", PAYLOAD, make())),
    }
    for entry, enqueue in enqueues.items():

        def call(case: str, enqueue: Callable[[Any], object] = enqueue) -> object:
            return enqueue(BAD_ENQUEUE_OPTS[case])

        assert not_refused(InvalidOptions, BAD_ENQUEUE_OPTS, call) == [], entry
    assert_nothing_stored(store)


BAD_SCHEDULE_OPTS: dict[str, Callable[[], object]] = {
    "absolute expires": lambda: ScheduleOpts(expires=LATER),  # type: ignore[arg-type]
    "zero expires": lambda: ScheduleOpts(expires=0),
    "negative expires": lambda: ScheduleOpts(expires=-5),
    "zero max_attempts": lambda: ScheduleOpts(max_attempts=0),
    "priority above int32": lambda: ScheduleOpts(priority=2**31),
    "enqueue options": lambda: EnqueueOpts(),
}


def test_bad_schedule_options_are_refused_and_nothing_is_stored(store: Store) -> None:
    def register(case: str) -> object:
        return store.schedule("nightly", "@every 1m", "jobs", PAYLOAD, BAD_SCHEDULE_OPTS[case]())  # type: ignore[arg-type]

    assert not_refused(InvalidOptions, BAD_SCHEDULE_OPTS, register) == []
    assert_nothing_stored(store)


def test_a_lock_ttl_must_be_a_positive_duration(store: Store) -> None:
    ttls = [0, -1, timedelta(0), float("nan"), "30", None]
    assert not_refused(InvalidOptions, ttls, lambda ttl: store.try_lock("resource", "owner-1", ttl)) == []
    assert store.try_lock("resource", "owner-2", 30) is not None  # nothing was taken


def test_bad_durations_on_a_held_lease_or_job_change_nothing(store: Store) -> None:
    lock = store.try_lock("resource", "owner-1", 30)
    assert lock is not None
    expires = lock.expires_at
    with pytest.raises(InvalidOptions, match=r"^ttl must be > 0, not 0$"):
        lock.renew(0)
    assert lock.expires_at == expires

    store.queue("jobs").enqueue(PAYLOAD)
    job = must_claim(store.queue("jobs"))
    before = store.get_job(job.id)
    with pytest.raises(InvalidOptions, match=r"^delay must be >= 0, not -1$"):
        job.retry("boom", delay=-1)
    with pytest.raises(InvalidOptions, match=r"^wait must be >= 0, not -1$"):
        store.queue("jobs").claim("w", wait=-1)
    assert store.get_job(job.id) == before
