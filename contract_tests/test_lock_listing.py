"""The held locks, listed (``Store.locks``): name, owner, fencing token and lease end, in name order,
on every engine; a released or lapsed lock is not held and not listed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import InvalidArgument, InvalidName, InvalidOptions, LockInfo, ManualClock, Store

from ._checks import assert_utc

#: Names meant to trip an engine up: quotes and SQL, placeholders, markup, right-to-left text,
#: a character beyond the BMP (UTF-16 would sort it before U+FFFD; code points after),
#: and a name as long as names go.
HOSTILE = (
    "'; DROP TABLE locks; --",
    "%(name)s %s {s} ?",
    "<script>alert(1)</script>",
    "שלום evil",
    "\U0001f512 lock",
    "\ufffd replacement",
    "Z-upper",
    "a-lower",
    "l" * 128,
)


def test_a_held_lock_is_listed_with_its_owner_token_and_lease_end(store: Store, clock: ManualClock) -> None:
    assert store.locks() == []
    lock = store.try_lock("reports", "host-a:1", 30)
    assert lock is not None
    (listed,) = store.locks()
    assert isinstance(listed, LockInfo)
    assert (listed.name, listed.owner, listed.token) == ("reports", "host-a:1", lock.token)
    assert listed.expires_at == lock.expires_at == clock.now() + timedelta(seconds=30)
    assert_utc(listed.expires_at)


def test_a_released_or_lapsed_lock_is_not_listed_and_its_next_holder_is(store: Store, clock: ManualClock) -> None:
    released = store.try_lock("released", "alice", 30)
    lapsing = store.try_lock("lapsing", "alice", 10)
    assert released is not None
    assert lapsing is not None
    assert [lock.name for lock in store.locks()] == ["lapsing", "released"]
    assert released.release() is True
    assert [lock.name for lock in store.locks()] == ["lapsing"]
    clock.advance(timedelta(seconds=10) - timedelta(microseconds=1))
    assert [lock.name for lock in store.locks()] == ["lapsing"]  # still held, to the microsecond
    clock.advance(timedelta(microseconds=1))  # expires_at <= now: lapsed, though still stored
    assert store.locks() == []
    taken = store.try_lock("lapsing", "bob", 5)
    assert taken is not None
    assert [(lock.name, lock.owner, lock.token) for lock in store.locks()] == [("lapsing", "bob", taken.token)]
    assert taken.token > lapsing.token


def test_hostile_names_are_listed_as_given_in_code_point_order_a_page_at_a_time(store: Store) -> None:
    tokens = {}
    for name in HOSTILE:
        lock = store.try_lock(name, f"owner of {name[:100]}", 60)
        assert lock is not None
        tokens[name] = lock.token
    everything = store.locks(limit=1000)
    assert [lock.name for lock in everything] == sorted(HOSTILE)
    assert all(lock.owner == f"owner of {lock.name[:100]}" and lock.token == tokens[lock.name] for lock in everything)
    paged: list[LockInfo] = []
    after = None
    while True:
        page = store.locks(limit=2, after=after)
        paged.extend(page)
        if len(page) < 2:
            break
        after = page[-1].name
    assert paged == everything
    assert store.locks(after=sorted(HOSTILE)[-1]) == []


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        (0, InvalidOptions),
        (-1, InvalidOptions),
        (1001, InvalidOptions),
        (True, InvalidArgument),
        (2.0, InvalidArgument),
    ],
)
def test_a_page_size_must_be_an_int_from_1_to_1000(store: Store, limit: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        store.locks(limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("after", ["", " padded", "bell\x07", 5])
def test_a_name_to_list_after_must_be_a_name(store: Store, after: object) -> None:
    with pytest.raises(InvalidName):
        store.locks(after=after)  # type: ignore[arg-type]
