"""Name rules: shape (InvalidName), the reserved prefix (ReservedName), and the engine's own names."""

from __future__ import annotations

import pytest

from alkstore import RESERVED_PREFIX, InvalidName, ReservedName
from alkstore.rules._names import (
    MAX_NAME_LENGTH,
    SCHEDULER_LOCK,
    is_outbox_queue,
    outbox_queue,
    validate_label,
    validate_listed_queue,
    validate_name,
)


def test_the_reserved_prefix_and_length_limit_are_the_documented_ones() -> None:
    assert RESERVED_PREFIX == "__alkstore_"
    assert MAX_NAME_LENGTH == 128


@pytest.mark.parametrize(
    "name",
    [
        "q",
        "emails",
        "billing.invoices:eu-west",
        "with inner spaces",
        "ünïcödé-名前",
        "x" * 128,
        "__alkstore",  # the prefix needs its trailing underscore
        "_alkstore_x",
        "__ALKSTORE_x",  # the prefix is case-sensitive
        "a__alkstore_b",  # only a leading prefix is reserved
    ],
)
def test_valid_names_are_returned_unchanged(name: str) -> None:
    assert validate_name(name, "queue") == name
    assert validate_label(name, "worker id") == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("x" * 129, id="129-chars"),
        pytest.param("x" * 10_000, id="very-long"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("a\nb", id="newline"),
        pytest.param("a\tb", id="tab"),
        pytest.param("\x1b[31mred", id="escape"),
        pytest.param("a\u200bb", id="zero-width-space"),
        pytest.param("a\u00a0b", id="no-break-space"),
        pytest.param("a\ud800", id="lone-surrogate"),
        pytest.param(" q", id="leading-space"),
        pytest.param("q ", id="trailing-space"),
        pytest.param(" ", id="only-space"),
        pytest.param("q\n", id="trailing-newline"),
    ],
)
def test_malformed_names_raise_invalid_name(name: str) -> None:
    with pytest.raises(InvalidName):
        validate_name(name, "queue")
    with pytest.raises(InvalidName):
        validate_label(name, "worker id")


@pytest.mark.parametrize("name", [None, 1, 1.5, b"q", ["q"], True])
def test_a_name_that_is_not_a_str_raises_invalid_name(name: object) -> None:
    with pytest.raises(InvalidName, match="must be a str"):
        validate_name(name, "queue")


def test_a_name_under_the_reserved_prefix_raises_reserved_name_not_invalid_name() -> None:
    for name in [RESERVED_PREFIX, RESERVED_PREFIX + "scheduler", RESERVED_PREFIX + "outbox:x", SCHEDULER_LOCK]:
        with pytest.raises(ReservedName) as info:
            validate_name(name, "lock")
        assert not isinstance(info.value, InvalidName)


def test_a_reserved_name_that_is_also_malformed_is_reported_as_malformed() -> None:
    with pytest.raises(InvalidName):
        validate_name(RESERVED_PREFIX + "x" * 200, "queue")
    with pytest.raises(InvalidName):
        validate_name(RESERVED_PREFIX + "x ", "queue")


def test_labels_may_use_the_reserved_prefix() -> None:
    assert validate_label(SCHEDULER_LOCK, "lock owner") == SCHEDULER_LOCK


def test_the_error_names_the_kind_of_name() -> None:
    with pytest.raises(InvalidName, match=r"^schedule name"):
        validate_name("", "schedule")
    with pytest.raises(ReservedName, match=r"^outbox name"):
        validate_name(RESERVED_PREFIX + "x", "outbox")


def test_the_scheduler_lock_is_reserved_so_no_user_can_take_it() -> None:
    assert SCHEDULER_LOCK.startswith(RESERVED_PREFIX)
    with pytest.raises(ReservedName):
        validate_name(SCHEDULER_LOCK, "lock")


def test_an_outbox_backing_queue_is_reserved_and_recognised() -> None:
    backing = outbox_queue("orders")
    assert backing.startswith(RESERVED_PREFIX)
    assert "orders" in backing
    assert is_outbox_queue(backing)
    assert outbox_queue("orders") != outbox_queue("orders2")
    with pytest.raises(ReservedName):
        validate_name(backing, "queue")


@pytest.mark.parametrize("queue", ["orders", "outbox:orders", "__alkstore_scheduler", "__alkstore_outbox"])
def test_other_queues_are_not_outbox_queues(queue: str) -> None:
    assert not is_outbox_queue(queue)


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        ("", r"^queue name must not be empty$"),
        (RESERVED_PREFIX + "x", r"^queue name '__alkstore_x' uses the reserved prefix '__alkstore_'$"),
        (outbox_queue(" padded"), r"^outbox name ' padded' has leading or trailing whitespace$"),
        (outbox_queue(""), r"^outbox name must not be empty$"),
    ],
)
def test_a_listed_queue_that_is_not_a_queue_or_an_outbox_is_refused_naming_which(listed: str, message: str) -> None:
    with pytest.raises((InvalidName, ReservedName), match=message):
        validate_listed_queue(listed)
    assert validate_listed_queue(outbox_queue("orders")) == outbox_queue("orders")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (7, r"^queue name must be a str, not int$"),
        ("q" * (MAX_NAME_LENGTH + 1), rf"^queue name is {MAX_NAME_LENGTH + 1} characters long; the limit is 128$"),
        ("tab\there", r"^queue name 'tab\\there' contains unprintable characters$"),
    ],
)
def test_a_bad_name_is_refused_with_its_kind_and_what_is_wrong(name: object, message: str) -> None:
    with pytest.raises(InvalidName, match=message):
        validate_name(name, "queue")
