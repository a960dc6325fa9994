"""A listing's payload filter (``Store.jobs(..., contains=...)``): PostgreSQL's ``jsonb @>`` on every engine."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from alkstore import EnqueueOpts, InvalidArgument, JobPhase, Store

from ._profiles import sized

_QUEUES = itertools.count()


def ids(store: Store, queue: str, contains: Any, phase: JobPhase = JobPhase.READY, limit: int = 50) -> list[int]:
    """Every id a filtered listing shows, page after page."""
    found: list[int] = []
    cursor: str | None = None
    while True:
        page = store.jobs(queue, phase, limit=limit, cursor=cursor, contains=contains)
        found += [job.id for job in page.jobs]
        if page.cursor is None:
            return found
        cursor = page.cursor


def test_a_filter_keeps_the_jobs_whose_payload_contains_it(store: Store) -> None:
    queue = store.queue("orders")
    payloads: list[Any] = [
        {"customer": 42, "total": 9},
        {"customer": 43},
        {"customer": 42, "tags": ["a", "b"], "address": {"city": "Oslo", "zip": "0150"}},
        [1, {"x": 2}],
        "customer 42",
        42,
        b"\x00{raw",
        {"customer": 42.0},
        {"customer": True},
        {"customer": "42"},
        {"nested": {"customer": 42}},
    ]
    made = [int(job_id) for job_id in queue.enqueue_many(payloads)]
    by = dict(enumerate(made))

    assert ids(store, "orders", {"customer": 42}) == [by[0], by[2], by[7]]
    assert ids(store, "orders", {"customer": 42}, limit=1) == [by[0], by[2], by[7]], "the cursor pages the filter"
    assert ids(store, "orders", {"tags": ["b"]}) == [by[2]]
    assert ids(store, "orders", {"tags": ["b", "a", "b"]}) == [by[2]]
    assert ids(store, "orders", {"address": {"city": "Oslo"}}) == [by[2]]
    assert ids(store, "orders", [{"x": 2}]) == [by[3]]
    assert ids(store, "orders", [1]) == [by[3]]
    assert ids(store, "orders", {"customer": True}) == [by[8]]
    assert ids(store, "orders", {"customer": 44}) == []
    assert ids(store, "orders", {}) == [by[i] for i in (0, 1, 2, 7, 8, 9, 10)], "every object contains {}"
    assert ids(store, "orders", []) == [by[3]], "every array contains []"
    assert len(ids(store, "orders", None)) == len(payloads), "no filter lists every job"


def test_a_filter_reads_every_payload_the_codec_stores_nuls_and_raw_bytes_included(store: Store) -> None:
    """PostgreSQL's jsonb holds no NUL in a string: a payload with one is still filtered, by its other parts
    and by its NULs alike, and it never makes the filter fail for the rest of its queue."""
    queue = store.queue("nul")
    payloads: list[Any] = [
        {"customer": 42, "note": "a\x00b"},
        {"customer": 42, "\x00": ["\x00"]},
        b"\x00{raw",
        b'{"customer": 42}',  # raw bytes that read as JSON: stored behind the codec's NUL, never filtered
        {"customer": 42, "note": "\x01"},
        {"customer": 42, "note": "\x010"},
        {"customer": 42, "note": "\\u0000"},  # a backslash, then the text of an escape
        ["\x00", {"customer": 42}],
        {"customer": 43, "note": "\x00"},
        {"customer": 42},
    ]
    made = [int(job_id) for job_id in queue.enqueue_many(payloads)]
    by = dict(enumerate(made))

    assert ids(store, "nul", {"customer": 42}) == [by[i] for i in (0, 1, 4, 5, 6, 9)]
    assert ids(store, "nul", {"customer": 42}, limit=1) == [by[i] for i in (0, 1, 4, 5, 6, 9)]
    assert ids(store, "nul", {"note": "a\x00b"}) == [by[0]]
    assert ids(store, "nul", {"note": "\x00"}) == [by[8]]
    assert ids(store, "nul", {"\x00": ["\x00"]}) == [by[1]]
    assert ids(store, "nul", {"note": "\x01"}) == [by[4]], "a NUL is not taken for another character"
    assert ids(store, "nul", {"note": "\x010"}) == [by[5]]
    assert ids(store, "nul", {"note": "\\u0000"}) == [by[6]]
    assert ids(store, "nul", ["\x00"]) == [by[7]]
    assert ids(store, "nul", [{"customer": 42}]) == [by[7]]
    assert ids(store, "nul", {}) == [by[i] for i in (0, 1, 4, 5, 6, 8, 9)], "raw bytes contain no probe"
    for phase in JobPhase:
        assert ids(store, "nul", {"customer": 44}, phase) == []


def test_every_phase_can_be_filtered(store: Store) -> None:
    queue = store.queue("orders")
    queue.enqueue({"customer": 1, "n": 1}, EnqueueOpts(delay=3600))
    delayed = queue.enqueue({"customer": 2, "n": 2}, EnqueueOpts(delay=3600))
    running, dying = queue.enqueue_many([{"customer": 2, "n": 3}, {"customer": 2, "n": 4}])
    job = queue.claim("w1")
    assert job is not None
    assert job.id == running
    dead = queue.claim("w1")
    assert dead is not None
    dead.fail("boom")
    assert ids(store, "orders", {"customer": 2}, JobPhase.DELAYED) == [delayed]
    assert ids(store, "orders", {"customer": 2}, JobPhase.RUNNING) == [running]
    assert ids(store, "orders", {"customer": 2}, JobPhase.DEAD) == [dying]
    assert ids(store, "orders", {"customer": 1}, JobPhase.DEAD) == []


@pytest.mark.parametrize("bad", ["customer", 42, 4.2, True, b"{}", ("a",)])
def test_a_filter_is_a_json_object_or_array(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="contains must be a JSON object or array"):
        store.jobs("orders", contains=bad)


# -- against an independent model of jsonb containment -------------------------------------------


def model(value: Any, probe: Any, top: bool = True) -> bool:
    """PostgreSQL's documented ``@>``, written apart from the engines' rule."""
    if isinstance(probe, dict):
        if not isinstance(value, dict):
            return False
        return all(k in value and model(value[k], v, False) for k, v in probe.items())
    if isinstance(probe, list):
        if not isinstance(value, list):
            return False
        return all(any(model(mine, item, False) for mine in value) for item in probe)
    if isinstance(value, list | dict):
        return False
    if type(value) is bool or type(probe) is bool:
        return type(value) is type(probe) and value == probe
    if value is None or probe is None:
        return value is probe
    if isinstance(value, str) or isinstance(probe, str):
        return bool(value == probe)
    return Decimal(str(value)) == Decimal(str(probe))


#: A small world, so that probes often meet payloads: values that look alike but differ in jsonb
#: (``true`` and ``1``, ``1`` and ``"1"``), values that differ in Python but not in jsonb (``1``, ``1.0``) and
#: strings jsonb cannot hold as they are (a NUL) next to the character that stands in for it.
_SCALARS = st.sampled_from([None, True, False, 0, 1, 1.0, -0.0, 2.5, "1", "a", "\x00", "\x01"])
_KEYS = st.sampled_from(["a", "b"])
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=2),
    max_leaves=4,
)
_CONTAINERS = st.lists(_VALUES, max_size=2) | st.dictionaries(_KEYS, _VALUES, max_size=2)


#: By type and value (``True`` and ``1`` are one key of a plain dict): what a probe may put in a value's place.
_LOOK_ALIKES: dict[tuple[type, Any], list[Any]] = {
    (bool, True): [1, "1"],
    (bool, False): [0],
    (int, 1): [True, 1.0, "1"],
    (int, 0): [False, -0.0],
    (str, "1"): [1],
}


def twist(value: Any, draw: Any) -> Any:
    """A probe made from ``value``: some keys and elements dropped, some scalars swapped for look-alikes."""
    kept = st.sampled_from([True, True, True, False])
    if isinstance(value, dict):
        return {k: twist(v, draw) for k, v in value.items() if draw(kept)}
    if isinstance(value, list):
        return [twist(v, draw) for v in value if draw(kept)]
    alikes = _LOOK_ALIKES.get((type(value), value), [])
    return draw(st.sampled_from([*alikes, value]))


@sized(0.5, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payloads=st.lists(_CONTAINERS, min_size=1, max_size=5), data=st.data())
def test_the_filter_agrees_with_a_model_of_jsonb_containment(store: Store, payloads: list[Any], data: Any) -> None:
    probe = data.draw(_CONTAINERS | st.sampled_from(payloads).map(lambda value: twist(value, data.draw)))
    name = f"model-{next(_QUEUES)}"
    made = [int(job_id) for job_id in store.queue(name).enqueue_many(payloads)]
    expected = [job_id for job_id, payload in zip(made, payloads, strict=True) if model(payload, probe)]
    assert ids(store, name, probe) == expected
