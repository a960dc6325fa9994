"""Leases on names: TTL, owner, renew, release, and a token that grows with every acquisition."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from alkstore import LeaseLost, Lock, ManualClock, Store

from ._checks import assert_utc


def take(store: Store, name: str, owner: str, ttl: float | timedelta = 30) -> Lock:
    lock = store.try_lock(name, owner, ttl)
    assert lock is not None, f"{owner} could not take {name!r}"
    return lock


def test_a_lease_belongs_to_its_owner_until_its_ttl_runs_out(store: Store, clock: ManualClock) -> None:
    lock = take(store, "resource", "alice", 30)
    assert (lock.name, lock.owner, lock.ttl) == ("resource", "alice", timedelta(seconds=30))
    assert lock.expires_at == clock.now() + timedelta(seconds=30)
    assert_utc(lock.expires_at)
    assert store.try_lock("resource", "bob", 30) is None
    clock.advance(timedelta(seconds=30) - timedelta(microseconds=1))
    assert store.try_lock("resource", "bob", 30) is None
    assert store.try_lock("other", "bob", 30) is not None  # names are independent


def test_an_expired_lease_is_free_and_the_next_holder_gets_a_larger_token(store: Store, clock: ManualClock) -> None:
    alice = take(store, "resource", "alice", 30)
    clock.advance(30)  # expires_at <= now: free
    bob = take(store, "resource", "bob", timedelta(seconds=10))
    assert bob.owner == "bob"
    assert bob.token > alice.token
    assert bob.expires_at == clock.now() + timedelta(seconds=10)


def test_the_same_owner_retaking_a_held_lease_extends_it_and_keeps_its_token(store: Store, clock: ManualClock) -> None:
    first = take(store, "resource", "alice", 30)
    clock.advance(20)
    again = take(store, "resource", "alice", 30)
    assert again.token == first.token
    assert again.expires_at == clock.now() + timedelta(seconds=30)
    clock.advance(20)  # past the first expiry, inside the second
    assert store.try_lock("resource", "bob", 30) is None


def test_tokens_grow_with_every_new_acquisition(store: Store, clock: ManualClock) -> None:
    tokens = []
    for round_ in range(4):
        lock = take(store, "resource", f"owner-{round_ % 2}", 5)
        tokens.append(lock.token)
        if round_ % 2:
            assert lock.release() is True
        else:
            clock.advance(5)
    assert tokens == sorted(set(tokens))


def test_renew_extends_from_now_by_the_acquiring_ttl_or_the_one_given(store: Store, clock: ManualClock) -> None:
    lock = take(store, "resource", "alice", 30)
    clock.advance(25)
    lock.renew()
    assert lock.expires_at == clock.now() + timedelta(seconds=30)
    clock.advance(25)
    lock.renew(timedelta(minutes=5))
    assert lock.expires_at == clock.now() + timedelta(minutes=5)
    clock.advance(timedelta(minutes=4))
    assert store.try_lock("resource", "bob", 30) is None
    token = lock.token
    lock.renew(1)
    assert lock.token == token


def test_renewing_a_lease_taken_over_after_it_lapsed_raises_lease_lost(store: Store, clock: ManualClock) -> None:
    alice = take(store, "resource", "alice", 30)
    clock.advance(31)
    bob = take(store, "resource", "bob", 30)
    with pytest.raises(LeaseLost):
        alice.renew()
    assert store.try_lock("resource", "carol", 30) is None  # bob still holds it
    bob.renew()


def test_renewing_a_lapsed_lease_raises_lease_lost_even_if_nobody_took_it(store: Store, clock: ManualClock) -> None:
    lock = take(store, "resource", "alice", 30)
    clock.advance(30)
    with pytest.raises(LeaseLost):
        lock.renew()


def test_release_frees_the_lease_once(store: Store) -> None:
    lock = take(store, "resource", "alice", 30)
    assert lock.release() is True
    assert lock.release() is False
    bob = take(store, "resource", "bob", 30)
    assert bob.owner == "bob"
    with pytest.raises(LeaseLost):
        lock.renew()


def test_releasing_a_lease_someone_else_took_over_leaves_their_lease_alone(store: Store, clock: ManualClock) -> None:
    alice = take(store, "resource", "alice", 30)
    clock.advance(30)
    bob = take(store, "resource", "bob", 30)
    assert alice.release() is False
    assert store.try_lock("resource", "carol", 30) is None
    assert bob.release() is True


def test_a_lease_used_as_a_context_manager_is_released_on_exit(store: Store) -> None:
    with take(store, "resource", "alice", 30) as lock:
        assert store.try_lock("resource", "bob", 30) is None
        assert lock.owner == "alice"
    assert store.try_lock("resource", "bob", 30) is not None


def test_a_renewal_with_a_peek_renews_its_own_live_lock_and_no_other(store: Store, clock: ManualClock) -> None:
    """``renew_lock_peek`` (the leader's renewal across its sleep) renews as ``renew_lock`` does: the
    lock of that name under that token while it holds, never another; a lapsed or stolen one is lost."""
    engine = store.engine
    now = clock.now()
    ten, twenty = now + timedelta(seconds=10), now + timedelta(seconds=20)
    mine, other = engine.try_lock("mine", "me", now, ten), engine.try_lock("other", "me", now, ten)
    assert mine is not None
    assert other is not None
    store.schedule("soon", "@every 1m", "q")
    renewed, soonest = engine.renew_lock_peek(mine, now, twenty)
    assert (renewed.name, renewed.token, renewed.expires_at) == (mine.name, mine.token, twenty)
    assert soonest == engine.soonest_boundary()
    assert soonest is not None
    assert engine.read_lock("other") == other, "another lock is left as it was"
    with pytest.raises(LeaseLost):
        engine.renew_lock_peek(dataclasses.replace(renewed, token=renewed.token + 1), now, twenty)
    with pytest.raises(LeaseLost):
        engine.renew_lock_peek(other, ten, twenty)  # lapsed at this very instant
    assert engine.read_lock("other") == other
    assert engine.read_lock("mine") == renewed
