"""The action log (``Store.log_action``, ``Store.actions``): entries appended with the store's clock and
listed newest first a page at a time, texts kept as given, bad input refused before anything is written."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import ActionInfo, InvalidArgument, InvalidName, InvalidOptions, ManualClock, Store

from ._checks import assert_utc

#: Texts meant to trip an engine or a page up: SQL, placeholders, markup, right-to-left controls,
#: a character beyond the BMP, new lines, and a target and an outcome as long as they may be.
HOSTILE_TARGETS = (
    "'; DROP TABLE action_log; --",
    "%(target)s %s {s} ?",
    "<script>alert(1)</script>",
    "invoice\u202efdp.exe",
    "\U0001f512 lock\nsecond line",
    "t" * 1000,
    "",
)


def test_an_action_is_logged_with_who_what_target_when_and_outcome(store: Store, clock: ManualClock) -> None:
    assert store.actions() == []
    first = store.log_action("pause", "emails", "Paused emails.", role="full", address="10.0.0.7")
    clock.advance(timedelta(seconds=5))
    second = store.log_action("requeue", "job 42", "refused: not dead", role="full", address="::1")
    assert second > first
    newest, oldest = store.actions()
    assert isinstance(newest, ActionInfo)
    assert (oldest.id, oldest.role, oldest.address, oldest.action, oldest.target, oldest.outcome) == (
        first,
        "full",
        "10.0.0.7",
        "pause",
        "emails",
        "Paused emails.",
    )
    assert (newest.id, newest.action, newest.address, newest.outcome) == (second, "requeue", "::1", "refused: not dead")
    assert newest.at == clock.now()
    assert oldest.at == clock.now() - timedelta(seconds=5)
    assert_utc(newest.at)


def test_hostile_texts_are_kept_as_given_and_pages_never_overlap(store: Store) -> None:
    ids = [store.log_action("purge", target, "o" * 2000, role="read", address="unknown") for target in HOSTILE_TARGETS]
    everything = store.actions(limit=1000)
    assert [entry.id for entry in everything] == sorted(ids, reverse=True)
    assert [entry.target for entry in everything] == list(reversed(HOSTILE_TARGETS))
    assert all(entry.outcome == "o" * 2000 for entry in everything)
    paged: list[ActionInfo] = []
    before = None
    while True:
        page = store.actions(limit=3, before=before)
        paged.extend(page)
        if len(page) < 3:
            break
        before = page[-1].id
    assert paged == everything
    assert store.actions(before=min(ids)) == []


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("role", "", InvalidName),
        ("role", "r" * 129, InvalidName),
        ("address", " padded", InvalidName),
        ("action", "bell\x07", InvalidName),
        ("action", 5, InvalidName),
        ("target", "t" * 1001, InvalidOptions),
        ("target", "nul\x00", InvalidOptions),
        ("target", b"bytes", InvalidArgument),
        ("outcome", "", InvalidOptions),
        ("outcome", "o" * 2001, InvalidOptions),
        ("outcome", "nul\x00", InvalidOptions),
    ],
)
def test_a_bad_entry_is_refused_and_nothing_is_written(store: Store, field: str, value: object, error: type) -> None:
    entry: dict[str, object] = {"action": "pause", "target": "q", "outcome": "paused", "role": "full", "address": "a"}
    entry[field] = value
    with pytest.raises(error):
        store.log_action(**entry)  # type: ignore[arg-type]
    assert store.actions() == []


@pytest.mark.parametrize(
    ("limit", "before", "error"),
    [
        (0, None, InvalidOptions),
        (1001, None, InvalidOptions),
        (True, None, InvalidArgument),
        (10, 0, InvalidOptions),
        (10, "5", InvalidArgument),
        (10, False, InvalidArgument),
        (10, 2**63, InvalidOptions),
    ],
)
def test_a_page_is_1_to_1000_entries_before_a_positive_id(
    store: Store, limit: object, before: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        store.actions(limit=limit, before=before)  # type: ignore[arg-type]
