"""The ``@every`` grammar's exact surface: what is accepted, what is rejected, and why."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore import Every, InvalidSpec, parse_spec
from alkstore.rules._spec import MAX_INTERVAL_SECONDS

# The test's own statement of the grammar, written independently of the parser.
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
TEN_YEARS = 3650 * 86400
PREFIX = "@every "


def is_canonical(text: str) -> bool:
    """Whether ``text`` is exactly ``@every <n><unit>``: ASCII digits, no leading zero, n*unit <= ten years."""
    if not text.startswith(PREFIX):
        return False
    digits, unit = text[len(PREFIX) : -1], text[-1:]
    if unit not in UNITS or not digits or digits[0] == "0":
        return False
    if any(char not in "0123456789" for char in digits) or len(digits) > len(str(TEN_YEARS)):
        return False
    return int(digits) * UNITS[unit] <= TEN_YEARS


def test_the_longest_interval_is_ten_years() -> None:
    assert MAX_INTERVAL_SECONDS == TEN_YEARS


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [
        ("@every 1s", 1),
        ("@every 10s", 10),
        ("@every 59m", 59 * 60),
        ("@every 24h", 24 * 3600),
        ("@every 100d", 100 * 86400),
        ("@every 3650d", TEN_YEARS),
        ("@every 87600h", TEN_YEARS),
        ("@every 5256000m", TEN_YEARS),
        ("@every 315360000s", TEN_YEARS),
    ],
)
def test_canonical_specs_are_accepted_and_print_back_unchanged(spec: str, seconds: int) -> None:
    every = parse_spec(spec)
    assert isinstance(every, Every)
    assert every.seconds == seconds
    assert str(every) == spec


def test_a_parsed_spec_keeps_its_count_and_unit_rather_than_normalising_to_seconds() -> None:
    assert parse_spec("@every 2h") == Every(2, "h")
    assert parse_spec("@every 120m") == Every(120, "m")
    assert parse_spec("@every 2h") != parse_spec("@every 120m")


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("", id="empty"),
        pytest.param("@every", id="no-interval"),
        pytest.param("@every ", id="prefix-only"),
        pytest.param("@every 0s", id="zero"),
        pytest.param("@every 00s", id="zeros"),
        pytest.param("@every 01m", id="leading-zero"),
        pytest.param("@every -1s", id="negative"),
        pytest.param("@every +1s", id="plus-sign"),
        pytest.param("@every 1.5s", id="fraction"),
        pytest.param("@every 1e3s", id="exponent"),
        pytest.param("@every 1_000s", id="underscore-separator"),
        pytest.param("@every 0x10s", id="hex"),
        pytest.param("@every 1S", id="upper-unit"),
        pytest.param("@EVERY 1s", id="upper-keyword"),
        pytest.param("@Every 1s", id="capitalised-keyword"),
        pytest.param("@every  1s", id="two-spaces"),
        pytest.param(" @every 1s", id="leading-space"),
        pytest.param("@every 1s ", id="trailing-space"),
        pytest.param("@every 1s\n", id="trailing-newline"),
        pytest.param("@every\t1s", id="tab"),
        pytest.param("@every\n1s", id="newline"),
        pytest.param("@every\u00a01s", id="no-break-space"),
        pytest.param("@every1s", id="no-space"),
        pytest.param("@every 1 s", id="space-before-unit"),
        pytest.param("@every 1", id="no-unit"),
        pytest.param("@every s", id="no-count"),
        pytest.param("@every 1w", id="weeks"),
        pytest.param("@every 1ms", id="milliseconds"),
        pytest.param("@every 1sm", id="two-units"),
        pytest.param("@every 1s1s", id="repeated"),
        pytest.param("every 1s", id="no-at-sign"),
        pytest.param("@every 3651d", id="ten-years-and-a-day"),
        pytest.param("@every 315360001s", id="ten-years-and-a-second"),
        pytest.param("@every 5256001m", id="ten-years-and-a-minute"),
        pytest.param("@every 87601h", id="ten-years-and-an-hour"),
        pytest.param("@every 99999999999999999999999d", id="huge"),
        pytest.param("@every \u0661s", id="arabic-indic-digit"),
        pytest.param("@every \uff11s", id="fullwidth-digit"),
        pytest.param("@every 1\uff53", id="fullwidth-unit"),
        pytest.param("\uff20every 1s", id="fullwidth-at-sign"),
        pytest.param("@daily", id="cron-daily"),
        pytest.param("@hourly", id="cron-hourly"),
        pytest.param("*/5 * * * *", id="cron-five-fields"),
        pytest.param("0 0 * * *", id="cron-midnight"),
        pytest.param("@every " + "1" * 10_000 + "s", id="long-digits"),
        pytest.param("x" * 100_000, id="long-garbage"),
    ],
)
def test_anything_but_a_canonical_spec_is_rejected(spec: str) -> None:
    assert not is_canonical(spec)
    with pytest.raises(InvalidSpec):
        parse_spec(spec)


@pytest.mark.parametrize("spec", [None, 1, 1.0, b"@every 1s", ["@every 1s"], Every(1, "s")])
def test_a_spec_that_is_not_a_str_is_rejected_with_invalid_spec(spec: object) -> None:
    with pytest.raises(InvalidSpec, match=rf"^spec must be a str, not {type(spec).__name__}$"):
        parse_spec(spec)


def test_invalid_spec_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="@every"):
        parse_spec("@every 1w")


@pytest.mark.parametrize(
    "spec", ["*/5 * * * *", "0 0 * * *", "0 0 * * * *", "0 0 12 * * ? 2026", "@daily", "@hourly", "@weekly"]
)
def test_a_cron_expression_is_rejected_with_a_hint_that_cron_is_not_supported_and_anchors_are(spec: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec(spec)
    assert str(info.value) == (
        f"spec {spec!r} is not of the form '@every <n><s|m|h|d>' (cron expressions are not supported: for set"
        " times, anchor an @every schedule; '@every 1d' with ScheduleOpts(anchor=<an aware datetime at 02:00>)"
        " fires at 02:00 every day)"
    )


@pytest.mark.parametrize("spec", ["@every 0s", "@every 0m", "@every 0h", "@every 0d"])
def test_a_zero_interval_is_told_it_must_be_at_least_a_second(spec: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec(spec)
    assert str(info.value) == f"spec {spec!r}: the interval must be at least 1s"


@pytest.mark.parametrize("spec", ["@every 1w", "@every 00s", "hello", "", "@every", "* * * *", "0 0 12 * * ? 2026 x"])
def test_a_malformed_every_spec_gets_no_cron_hint(spec: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec(spec)
    assert str(info.value) == f"spec {spec!r} is not of the form '@every <n><s|m|h|d>'"


def test_an_over_long_interval_names_the_limit() -> None:
    with pytest.raises(InvalidSpec, match="3650d"):
        parse_spec("@every 3651d")


def test_the_message_for_a_huge_spec_stays_short() -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec("@every " + "9" * 100_000 + "s")
    assert len(str(info.value)) < 200


# -- properties -----------------------------------------------------------------------------------


@st.composite
def canonical_specs(draw: st.DrawFn) -> tuple[str, int, str]:
    unit = draw(st.sampled_from(sorted(UNITS)))
    count = draw(st.integers(1, TEN_YEARS // UNITS[unit]) | st.integers(1, 100))
    return f"@every {count}{unit}", count, unit


@settings(max_examples=200, deadline=None)
@given(canonical_specs())
def test_every_canonical_spec_round_trips_with_its_interval_in_seconds(case: tuple[str, int, str]) -> None:
    spec, count, unit = case
    every = parse_spec(spec)
    assert str(every) == spec
    assert (every.count, every.unit) == (count, unit)
    assert every.seconds == count * UNITS[unit]


# Characters a mutation may insert or substitute: the grammar's own alphabet, its near misses,
# whitespace of every kind, and digits and letters from outside ASCII.
_NEAR_MISSES = "@every 0123456789smhdSMHDwy-+._,:\t\n\r\x0b\x0c\u00a0\u2003\u0661\uff11\uff53\uff20\u00b9\u2460"
_mutation_chars = st.sampled_from(_NEAR_MISSES) | st.characters()


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    text = draw(canonical_specs())[0]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "swapcase", "zero-pad", "pad"]))
        at = draw(st.integers(0, len(text)))
        if kind == "insert":
            text = text[:at] + draw(_mutation_chars) + text[at:]
        elif kind == "delete" and text:
            at = min(at, len(text) - 1)
            text = text[:at] + text[at + 1 :]
        elif kind == "replace" and text:
            at = min(at, len(text) - 1)
            text = text[:at] + draw(_mutation_chars) + text[at + 1 :]
        elif kind == "swapcase":
            text = text[:at] + text[at:].swapcase()
        elif kind == "zero-pad":
            text = text.replace(" ", " " + "0" * draw(st.integers(1, 3)), 1)
        else:
            text = draw(st.sampled_from([" ", "\t", "\n", "\u00a0"])) + text
    return text


def _accepted(text: str) -> bool:
    try:
        every = parse_spec(text)
    except InvalidSpec:
        return False
    assert str(every) == text
    return True


@settings(max_examples=400, deadline=None)
@given(mutated_specs())
def test_a_mutated_spec_is_accepted_exactly_when_it_is_still_canonical(text: str) -> None:
    assert _accepted(text) == is_canonical(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_random_text_is_accepted_exactly_when_it_is_canonical(text: str) -> None:
    assert _accepted(text) == is_canonical(text)


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"@every [1-9][0-9]{6,9}[smhd]", fullmatch=True))
def test_specs_near_the_upper_bound_are_accepted_exactly_up_to_ten_years(text: str) -> None:
    assert _accepted(text) == is_canonical(text)


def test_a_spec_of_the_longest_accepted_length_is_read_and_a_longer_one_is_not() -> None:
    longest = "@every " + "9" * 24 + "s"
    assert len(longest) == 32
    with pytest.raises(InvalidSpec, match="exceeds the longest interval"):
        parse_spec(longest)
    with pytest.raises(InvalidSpec, match="is not of the form"):
        parse_spec("@every " + "9" * 25 + "s")


def test_the_message_quotes_at_most_the_first_64_characters_of_the_spec() -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec("x" * 100)
    assert str(info.value) == f"spec {'x' * 64!r} is not of the form '@every <n><s|m|h|d>'"
