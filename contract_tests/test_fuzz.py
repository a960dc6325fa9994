"""A fuzz of the public entry points, on every engine: junk for every argument of every facade method.

Each example calls one entry point with arguments drawn from plausible values and junk (wrong
types, out-of-range numbers, naive and unrepresentable instants, unprintable names, objects of
alkstore's own that do not belong there). It asserts exactly what docs/tour.md promises: the call
succeeds, or raises an input error (an ``AlkstoreError``; no bare ``TypeError``, ``ValueError``,
``OverflowError`` or ``DatabaseError``). After an error nothing was stored — the schedules, the
jobs it could have touched or made, the stored queue configs, the lock it named and the
scheduler lease are as they were — and the store still works.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

import alkstore
from alkstore import (
    EnqueueOpts,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    InvalidSpec,
    Job,
    JsonCodec,
    Lock,
    ManualClock,
    ReservedName,
    ScheduleEntry,
    ScheduleOpts,
    StopToken,
    Store,
    SystemClock,
    parse_spec,
)
from alkstore.rules._names import outbox_queue
from tests.support import must_claim

from ._checks import committed
from ._engines import T0, EngineTarget
from ._profiles import sized
from ._runners import cancelled
from ._runtimes import store_of

#: What a refused call may raise: input errors, nothing else (``InvalidTransaction`` is an ``InvalidArgument``).
INPUT_ERRORS = (InvalidName, ReservedName, InvalidSpec, InvalidPayload, InvalidOptions, InvalidArgument)

QUEUES = ["jobs", "reports"]
OUTBOXES = ["mail"]
LOCKS = ["resource", "report"]
SCHEDULES = ["beat", "nightly"]
AHEAD, BEHIND = timezone(timedelta(hours=5)), timezone(timedelta(hours=-23, minutes=-59))
CANCELLED = cancelled()


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class BrokenMapping(dict[str, int]):
    def items(self) -> Any:
        raise RuntimeError("items() fails")


def _succeed(payload: object, job: Job) -> None:
    """A delivery that succeeds."""


def _fail(payload: object, job: Job) -> None:
    raise RuntimeError("delivery failed")


#: Values of the wrong kind, out of range or malformed, for any argument.
JUNK: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.datetimes(timezones=st.none() | st.sampled_from([UTC, AHEAD, BEHIND])),
    st.timedeltas(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(
        [
            datetime.min.replace(tzinfo=AHEAD),
            datetime.max.replace(tzinfo=BEHIND),
            datetime.max.replace(tzinfo=UTC),
            timedelta.max,
            timedelta.min,
            float("nan"),
            float("inf"),
            "",
            " padded ",
            "__alkstore_scheduler",
            "nul\x00",
            "\ud800",
            "x" * 129,
            object(),
            BrokenMapping(a=1),
            Unprintable(),
            EnqueueOpts(),
            ScheduleOpts(),
            CANCELLED,
            JsonCodec(),
            SystemClock(),
            [[[[]]]],
        ]
    ),
)


def mixed(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``plausible`` values, a quarter of the time junk: so that calls with several arguments
    often get every one right, and succeed, and the others are refused for one wrong argument."""
    return st.integers(0, 3).flatmap(lambda pick: plausible if pick else JUNK)


PLAUSIBLE_NAMES = QUEUES + OUTBOXES + LOCKS + SCHEDULES
NAMES = mixed(st.sampled_from(PLAUSIBLE_NAMES))
WORKERS = mixed(st.sampled_from(["w1", "courier"]))
SPECS = mixed(st.sampled_from(["@every 1s", "@every 5m", "@every 2h"]))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
PAYLOADS = mixed(JSON | st.binary(max_size=8))
DURATIONS = mixed(st.sampled_from([0.5, 1, 30, timedelta(seconds=5), timedelta(hours=2)]))
OPTIONAL_DURATIONS = st.none() | DURATIONS
INTS = mixed(st.sampled_from([1, 3, 7]))


def _option_fields(names: tuple[str, ...], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


ENQUEUE_FIELDS = ("delay", "run_at", "priority", "max_attempts", "expires", "visibility_timeout")
#: Instants near the fuzz's clock (``T0``), and the edges: naive, unrepresentable in UTC, the first and last.
INSTANTS = st.datetimes(
    min_value=datetime(2031, 5, 1), max_value=datetime(2031, 6, 1), timezones=st.sampled_from([UTC, AHEAD])
)
EDGE_INSTANTS = st.sampled_from(
    [
        datetime.min.replace(tzinfo=AHEAD),
        datetime.max.replace(tzinfo=BEHIND),
        datetime.min.replace(tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
        datetime(2031, 5, 17),
    ]
)
ENQUEUE_OPTS = st.none() | _option_fields(ENQUEUE_FIELDS, INSTANTS | EDGE_INSTANTS | DURATIONS | INTS).map(
    lambda fields: _built(EnqueueOpts, fields)
)
SCHEDULE_OPTS = st.none() | _option_fields(("priority", "max_attempts", "expires"), DURATIONS | INTS).map(
    lambda fields: _built(ScheduleOpts, fields)
)
CONFIGS = _option_fields(
    ("visibility_timeout", "max_attempts", "backoff_base", "backoff_cap", "priority"), DURATIONS | INTS
)
ERRORS = mixed(st.sampled_from(["boom", RuntimeError("boom"), Unprintable()]))
PAYLOAD_LISTS = mixed(st.lists(PAYLOADS, max_size=3))
DELIVERIES = mixed(st.sampled_from([_succeed, _fail]))
#: A stop token that lets a loop return at once, or junk that is not a token (a live one would block).
STOPS = mixed(st.just(CANCELLED)).filter(lambda v: v is CANCELLED or not isinstance(v, StopToken))
SCHEDULE_ENTRIES = st.builds(ScheduleEntry, NAMES, SPECS, NAMES, PAYLOADS, mixed(SCHEDULE_OPTS))
TRANSACTIONS = mixed(st.sampled_from(["open", "open", "committed"]))


def _built(kind: Callable[..., Any], fields: dict[str, Any]) -> Any:
    """Options built from ``fields``, or the fields themselves (junk) when the options refuse them."""
    try:
        return kind(**fields)
    except INPUT_ERRORS:
        return fields


@dataclass
class Fuzzing:
    """The store under fuzz, and what the fuzz knows of it."""

    store: Store
    clock: ManualClock
    high: int = 0  # the highest job id seen
    locks: dict[str, datetime] = field(default_factory=dict)  # lock names held by the fuzz, until when
    serial: itertools.count[int] = field(default_factory=itertools.count)
    job: Job | None = None  # the claimed job a call on a job is made on
    held: Lock | None = None  # the held lock a call on a lock is made on

    def the_job(self) -> Job:
        assert self.job is not None
        return self.job

    def the_lock(self) -> Lock:
        assert self.held is not None
        return self.held

    def saw(self, *ids: object) -> None:
        self.high = max([self.high, *(i for i in ids if isinstance(i, int) and not isinstance(i, bool))])

    def claimed(self) -> Job:
        self.saw(self.store.queue("fuzz").enqueue("work"))
        return must_claim(self.store.queue("fuzz"), "fuzzer")

    def lock(self) -> Lock:
        name = f"fuzz-{next(self.serial)}"
        lock = self.store.try_lock(name, "fuzzer", 60)
        assert lock is not None
        self.locks[name] = lock.expires_at
        return lock

    def snapshot(self, watched: list[int]) -> tuple[Any, ...]:
        """What an erring call must leave as it was: schedules, watched and next jobs, stored configs."""
        engine = self.store.engine
        queues = [*QUEUES, *(outbox_queue(name) for name in OUTBOXES)]
        ids = sorted({*watched, *range(self.high + 1, self.high + 4)})
        return (
            self.store.schedules(),
            [self.store.get_job(job_id) for job_id in ids if 0 < job_id < 2**63],
            [engine.queue_config(queue) for queue in queues],
        )

    def lock_is_free(self, name: str) -> bool:
        """Whether another owner could take ``name`` now (and it is left free again)."""
        probe = self.store.try_lock(name, "fuzz-observer", 1)
        if probe is None:
            return False
        probe.release()
        return True

    def still_usable(self) -> None:
        queue = self.store.queue("fuzz-probe")
        job_id = queue.enqueue({"probe": True})
        self.saw(job_id)
        job = must_claim(queue, "prober")
        assert job.id == job_id
        job.ack()
        self.store.run_schedules(cancelled())  # the scheduler lease is free: it leads and returns


@dataclass(frozen=True)
class Call:
    """One entry point: the strategy of its arguments, and how to call it in a ``Fuzzing``."""

    args: st.SearchStrategy[tuple[Any, ...]]
    run: Callable[[Fuzzing, Any], object]
    needs: str = ""  # "job" or "lock": the call is on a claimed job / held lock made for it


def _in_transaction(fuzz: Fuzzing, tx: object, call: Callable[[Any], object]) -> object:
    """``call`` with a transaction: ``"open"`` a live one (committed even when the call raises),
    ``"committed"`` one that has ended, anything else as given."""
    store = fuzz.store
    if tx == "committed":
        with store.transaction() as ended:
            pass
        return call(ended)
    if tx != "open":
        return call(tx)
    return committed(store, call)


def _jobs(fuzz: Fuzzing, jobs: object) -> Any:
    """``ack_many``'s argument: the claimed job (once or twice), or junk."""
    if jobs == "the job":
        return [fuzz.the_job()]
    if jobs == "the job twice":
        return [fuzz.the_job()] * 2
    return jobs


def _tick(fuzz: Fuzzing) -> object:
    fuzz.clock.advance(1)
    fires = fuzz.store.tick()
    fuzz.saw(*(fire.job_id for fire in fires))
    return fires


CALLS: dict[str, Call] = {
    # Store
    "Store.queue": Call(st.tuples(NAMES), lambda f, a: f.store.queue(*a)),
    "Store.outbox": Call(st.tuples(NAMES), lambda f, a: f.store.outbox(*a)),
    "Store.migrate": Call(st.tuples(), lambda f, a: f.store.migrate()),
    "Store.enqueue_tx": Call(
        st.tuples(TRANSACTIONS, NAMES, PAYLOADS, mixed(ENQUEUE_OPTS)),
        lambda f, a: _in_transaction(f, a[0], lambda tx: f.store.enqueue_tx(tx, *a[1:])),
    ),
    "Store.outbox_enqueue_tx": Call(
        st.tuples(TRANSACTIONS, NAMES, PAYLOADS, mixed(ENQUEUE_OPTS)),
        lambda f, a: _in_transaction(f, a[0], lambda tx: f.store.outbox_enqueue_tx(tx, *a[1:])),
    ),
    "Store.ack_many": Call(
        st.tuples(mixed(st.sampled_from(["the job", "the job twice"]))),
        lambda f, a: f.store.ack_many(_jobs(f, a[0])),
        needs="job",
    ),
    "Store.get_job": Call(st.tuples(mixed(st.integers(-2, 50))), lambda f, a: f.store.get_job(*a)),
    "Store.requeue_dead": Call(st.tuples(mixed(st.integers(-2, 50))), lambda f, a: f.store.requeue_dead(*a)),
    "Store.try_lock": Call(st.tuples(NAMES, WORKERS, DURATIONS), lambda f, a: f.store.try_lock(*a)),
    "Store.schedule": Call(
        st.tuples(NAMES, SPECS, NAMES, PAYLOADS, mixed(SCHEDULE_OPTS)), lambda f, a: f.store.schedule(*a)
    ),
    "Store.unschedule": Call(st.tuples(NAMES), lambda f, a: f.store.unschedule(*a)),
    "Store.schedules": Call(st.tuples(), lambda f, a: f.store.schedules()),
    "Store.tick": Call(st.tuples(), lambda f, a: _tick(f)),
    "Store.run_schedules": Call(
        st.tuples(STOPS, mixed(st.none()), mixed(st.booleans())),
        lambda f, a: f.store.run_schedules(a[0], a[1], standby=a[2]),
    ),
    "Store.enqueue_many_tx": Call(
        st.tuples(TRANSACTIONS, NAMES, PAYLOAD_LISTS, mixed(ENQUEUE_OPTS)),
        lambda f, a: _in_transaction(f, a[0], lambda tx: f.store.enqueue_many_tx(tx, *a[1:])),
    ),
    "Store.schedule_many": Call(
        st.tuples(mixed(st.lists(SCHEDULE_ENTRIES, max_size=3))), lambda f, a: f.store.schedule_many(*a)
    ),
    "Store.cancel": Call(st.tuples(mixed(st.integers(-2, 50))), lambda f, a: f.store.cancel(*a)),
    "Store.requeue_dead_many": Call(
        st.tuples(mixed(st.lists(mixed(st.integers(-2, 50)), max_size=3))), lambda f, a: f.store.requeue_dead_many(*a)
    ),
    "Store.purge_dead_many": Call(
        st.tuples(mixed(st.lists(mixed(st.integers(-2, 50)), max_size=3))), lambda f, a: f.store.purge_dead_many(*a)
    ),
    "Store.requeue_dead_queue": Call(st.tuples(NAMES), lambda f, a: f.store.requeue_dead_queue(*a)),
    "Store.purge_dead": Call(st.tuples(NAMES, DURATIONS), lambda f, a: f.store.purge_dead(*a)),
    "Store.queue_stats": Call(
        st.tuples(st.none() | NAMES, mixed(st.sampled_from([10_000, None, 5]))),
        lambda f, a: f.store.queue_stats(a[0], cap=a[1]),
    ),
    "Store.jobs": Call(
        st.tuples(NAMES, mixed(st.sampled_from(["ready", "delayed", "running", "dead"])), INTS, mixed(st.none())),
        lambda f, a: f.store.jobs(a[0], a[1], limit=a[2], cursor=a[3]),
    ),
    "Store.leader": Call(st.tuples(), lambda f, a: f.store.leader()),
    "Store.workers": Call(st.tuples(DURATIONS), lambda f, a: f.store.workers(*a)),
    "Store.transaction": Call(st.tuples(), lambda f, a: _in_transaction(f, "open", lambda tx: tx)),
    # Queue
    "Queue.enqueue": Call(
        st.tuples(NAMES, PAYLOADS, mixed(ENQUEUE_OPTS)), lambda f, a: f.store.queue(a[0]).enqueue(*a[1:])
    ),
    "Queue.claim (stopped)": Call(
        st.tuples(NAMES, WORKERS, st.none() | DURATIONS, st.just(1.0) | DURATIONS),
        lambda f, a: f.store.queue(a[0]).claim(a[1], wait=a[2], poll_interval=a[3], stop=CANCELLED),
    ),
    "Queue.claim (bad stop)": Call(
        st.tuples(
            NAMES, WORKERS, st.none() | DURATIONS, JUNK.filter(lambda v: v is not None and not isinstance(v, StopToken))
        ),
        lambda f, a: f.store.queue(a[0]).claim(a[1], wait=a[2], stop=a[3]),
    ),
    "Queue.enqueue_many": Call(
        st.tuples(NAMES, PAYLOAD_LISTS, mixed(ENQUEUE_OPTS)), lambda f, a: f.store.queue(a[0]).enqueue_many(*a[1:])
    ),
    "Queue.claim_many": Call(st.tuples(NAMES, WORKERS, INTS), lambda f, a: f.store.queue(a[0]).claim_many(*a[1:])),
    "Queue.configure": Call(st.tuples(NAMES, CONFIGS), lambda f, a: f.store.queue(a[0]).configure(**a[1])),
    "Queue.defaults": Call(st.tuples(NAMES), lambda f, a: f.store.queue(a[0]).defaults()),
    # Outbox
    "Outbox.enqueue": Call(
        st.tuples(NAMES, PAYLOADS, mixed(ENQUEUE_OPTS)), lambda f, a: f.store.outbox(a[0]).enqueue(*a[1:])
    ),
    "Outbox.run_once": Call(
        st.tuples(NAMES, WORKERS, DELIVERIES, st.none() | DURATIONS, st.just(1.0) | DURATIONS),
        lambda f, a: f.store.outbox(a[0]).run_once(a[1], a[2], wait=a[3], poll_interval=a[4], stop=CANCELLED),
    ),
    "Outbox.run": Call(
        st.tuples(NAMES, WORKERS, DELIVERIES, STOPS, st.just(1.0) | DURATIONS),
        lambda f, a: f.store.outbox(a[0]).run(a[1], a[2], a[3], poll_interval=a[4]),
    ),
    "Outbox.configure": Call(st.tuples(NAMES, CONFIGS), lambda f, a: f.store.outbox(a[0]).configure(**a[1])),
    # Job
    "Job.ack": Call(st.tuples(), lambda f, a: f.the_job().ack(), needs="job"),
    "Job.retry": Call(st.tuples(ERRORS, OPTIONAL_DURATIONS), lambda f, a: f.the_job().retry(*a), needs="job"),
    "Job.fail": Call(st.tuples(ERRORS), lambda f, a: f.the_job().fail(*a), needs="job"),
    "Job.heartbeat": Call(st.tuples(), lambda f, a: f.the_job().heartbeat(), needs="job"),
    "Job.release": Call(st.tuples(), lambda f, a: f.the_job().release(), needs="job"),
    # Lock
    "Lock.renew": Call(st.tuples(OPTIONAL_DURATIONS), lambda f, a: f.the_lock().renew(*a), needs="lock"),
    "Lock.release": Call(st.tuples(), lambda f, a: f.the_lock().release(), needs="lock"),
    # Values and the opener
    "EnqueueOpts": Call(
        _option_fields(ENQUEUE_FIELDS, EDGE_INSTANTS | JUNK).map(lambda d: (d,)), lambda f, a: EnqueueOpts(**a[0])
    ),
    "ScheduleOpts": Call(
        _option_fields(("priority", "max_attempts", "expires"), JUNK).map(lambda d: (d,)),
        lambda f, a: ScheduleOpts(**a[0]),
    ),
    "ManualClock": Call(st.tuples(EDGE_INSTANTS | JUNK), lambda f, a: ManualClock(*a)),
    "ManualClock.advance": Call(st.tuples(JUNK), lambda f, a: ManualClock(T0).advance(*a)),
    "parse_spec": Call(st.tuples(SPECS), lambda f, a: parse_spec(*a)),
    "JsonCodec.encode": Call(st.tuples(PAYLOADS), lambda f, a: JsonCodec().encode(*a)),
    "JsonCodec.decode": Call(st.tuples(mixed(st.binary(max_size=12))), lambda f, a: JsonCodec().decode(*a)),
    "Store": Call(
        st.tuples(mixed(st.just("the engine")), mixed(st.none()), mixed(st.none())),
        lambda f, a: store_of(f.store.engine if a[0] == "the engine" else a[0], clock=a[1], codec=a[2]),
    ),
    "open": Call(
        st.tuples(
            mixed(st.sampled_from(["memory://", "memory:///x", "nope://", "memory"])),
            mixed(st.none()),
            mixed(st.none()),
        ),
        lambda f, a: _open(*a),
    ),
}


def _open(url: Any, clock: Any, codec: Any) -> object:
    alkstore.open(url, clock=clock, codec=codec).close()
    return None


def _fuzz_once(fuzz: Fuzzing, name: str, args: tuple[Any, ...]) -> None:
    call = CALLS[name]
    flat = [item for arg in args for item in (arg if isinstance(arg, list) else [arg])]
    watched: list[int] = [arg for arg in flat if isinstance(arg, int) and not isinstance(arg, bool)]
    fuzz.job = fuzz.held = None
    if call.needs == "job":
        fuzz.job = fuzz.claimed()
        watched.append(fuzz.job.id)
    elif call.needs == "lock":
        fuzz.held = fuzz.lock()
    before = fuzz.snapshot(watched)
    try:
        result = call.run(fuzz, args)
    except INPUT_ERRORS as exc:
        refused: BaseException | None = exc
    else:
        refused = None
    event(f"{name}: {'ok' if refused is None else type(refused).__name__}")
    if refused is not None:
        what = f"{name}{args!r} raised {refused!r}"
        assert fuzz.snapshot(watched) == before, f"{what} but stored something"
        if fuzz.held is not None:
            assert not fuzz.lock_is_free(fuzz.held.name), f"{what} but freed the lock"
        if name == "Store.try_lock" and args[0] in PLAUSIBLE_NAMES:
            held = fuzz.locks.get(args[0])
            if held is None or held <= fuzz.clock.now():
                assert fuzz.lock_is_free(args[0]), f"{what} but took the lock"
        fuzz.still_usable()
        return
    if isinstance(result, int) and not isinstance(result, bool):
        fuzz.saw(result)
    if isinstance(result, list):
        fuzz.saw(*result)
    if isinstance(result, Lock):
        fuzz.locks[result.name] = result.expires_at
    if fuzz.held is not None:
        fuzz.locks[fuzz.held.name] = fuzz.held.expires_at


def test_junk_for_every_argument_of_every_entry_point_is_an_input_error_that_stores_nothing(
    engine: EngineTarget,
) -> None:
    clock = ManualClock(T0)
    with engine.store(clock) as store:
        fuzz = Fuzzing(store, clock)

        @sized(4)
        @given(data=st.data())
        def one_call(data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(sorted(CALLS)), label="entry point")
            args = data.draw(CALLS[name].args, label="arguments")
            _fuzz_once(fuzz, name, args)

        one_call()
