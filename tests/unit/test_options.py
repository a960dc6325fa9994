"""Option validation, resolution over the plain and outbox defaults, and the retry curve."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidOptions, QueueDefaults, ScheduleOpts
from alkstore.engine import QueueConfig
from alkstore.rules._names import outbox_queue
from alkstore.rules._options import (
    MAX_DURATION,
    as_duration,
    check_queue_config,
    queue_defaults,
    resolve_enqueue,
    resolve_schedule,
    retry_delay,
)

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
OUTBOX = outbox_queue("orders")
INT32_MAX = 2**31 - 1


# -- validation at construction ------------------------------------------------------------------


def test_delay_and_run_at_together_are_rejected() -> None:
    with pytest.raises(InvalidOptions, match=r"^give delay or run_at, not both$"):
        EnqueueOpts(delay=1, run_at=NOW)


@pytest.mark.parametrize(
    "delay",
    [-1, -0.5, timedelta(seconds=-1), math.nan, math.inf, -math.inf, True, "5", [5], MAX_DURATION * 2, 1e300],
)
def test_a_bad_delay_is_rejected(delay: object) -> None:
    with pytest.raises(InvalidOptions, match=r"^delay "):
        EnqueueOpts(delay=delay)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delay", "expected"), [(0, timedelta(0)), (2.5, timedelta(seconds=2.5)), (90, timedelta(seconds=90))]
)
def test_a_delay_is_normalised_to_a_timedelta(delay: float, expected: timedelta) -> None:
    assert EnqueueOpts(delay=delay).delay == expected
    assert EnqueueOpts(delay=expected).delay == expected


@pytest.mark.parametrize("priority", [True, False, 1.0, "1", INT32_MAX + 1, -INT32_MAX - 2])
def test_a_priority_that_is_not_an_int32_is_rejected(priority: object) -> None:
    message = "^" + re.escape(_int_refusal("priority", priority, -INT32_MAX - 1, INT32_MAX)) + "$"
    with pytest.raises(InvalidOptions, match=message):
        EnqueueOpts(priority=priority)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match=message):
        ScheduleOpts(priority=priority)  # type: ignore[arg-type]


def _int_refusal(what: str, value: object, low: int, high: int) -> str:
    """The whole message refusing ``value`` for an int option ``what`` in ``[low, high]``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{what} must be between {low} and {high}, not {value}"
    return f"{what} must be an int, not {type(value).__name__}"


@pytest.mark.parametrize("priority", [INT32_MAX, -INT32_MAX - 1, 0, -5])
def test_a_priority_anywhere_in_the_int32_range_is_accepted(priority: int) -> None:
    assert EnqueueOpts(priority=priority).priority == priority
    assert ScheduleOpts(priority=priority).priority == priority


@pytest.mark.parametrize("max_attempts", [0, -1, True, 2.0, INT32_MAX + 1])
def test_max_attempts_below_one_or_not_an_int_is_rejected(max_attempts: object) -> None:
    message = "^" + re.escape(_int_refusal("max_attempts", max_attempts, 1, INT32_MAX)) + "$"
    with pytest.raises(InvalidOptions, match=message):
        EnqueueOpts(max_attempts=max_attempts)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match=message):
        ScheduleOpts(max_attempts=max_attempts)  # type: ignore[arg-type]


def test_max_attempts_of_one_is_accepted() -> None:
    assert EnqueueOpts(max_attempts=1).max_attempts == 1


@pytest.mark.parametrize("field", ["run_at", "expires"])
def test_naive_datetimes_are_rejected(field: str) -> None:
    naive: dict[str, Any] = {field: datetime(2030, 1, 1)}
    with pytest.raises(InvalidOptions, match=rf"^{field} must be timezone-aware, not naive \(2030-01-01T00:00:00\)$"):
        EnqueueOpts(**naive)


def test_run_at_must_be_a_datetime() -> None:
    with pytest.raises(InvalidOptions, match=r"^run_at must be a timezone-aware datetime, not date$"):
        EnqueueOpts(run_at=NOW.date())  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match=r"^run_at must be a timezone-aware datetime, not float$"):
        EnqueueOpts(run_at=1.0)  # type: ignore[arg-type]


def test_aware_instants_are_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    run_at, expires = datetime(2030, 1, 1, 14, tzinfo=plus_two), datetime(2030, 1, 1, 15, tzinfo=plus_two)
    opts = EnqueueOpts(run_at=run_at, expires=expires)
    assert opts.run_at == NOW
    assert opts.run_at.tzinfo is UTC
    assert isinstance(opts.expires, datetime)
    assert opts.expires == NOW + timedelta(hours=1)
    assert opts.expires.tzinfo is UTC


@pytest.mark.parametrize("expires", [0, -1, timedelta(0), timedelta(seconds=-1), 1e-7, math.nan, "60"])
def test_expires_must_be_positive(expires: object) -> None:
    with pytest.raises(InvalidOptions, match=r"^expires "):
        EnqueueOpts(expires=expires)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match=r"^expires "):
        ScheduleOpts(expires=expires)  # type: ignore[arg-type]


def test_a_schedule_expires_cannot_be_an_absolute_instant() -> None:
    with pytest.raises(
        InvalidOptions, match=r"^a schedule's expires is relative to each fire \(seconds or timedelta\)$"
    ):
        ScheduleOpts(expires=NOW)  # type: ignore[arg-type]


# -- resolution ----------------------------------------------------------------------------------


def test_a_plain_queue_derives_300_s_visibility_3_attempts_and_a_5_s_backoff_base() -> None:
    defaults = queue_defaults("emails")
    assert defaults.visibility_timeout == timedelta(seconds=300)
    assert defaults.max_attempts == 3
    assert defaults.backoff_base == timedelta(seconds=5)
    assert defaults.backoff_cap == timedelta(hours=1)


def test_an_outbox_backing_queue_derives_the_60_5_5_set() -> None:
    defaults = queue_defaults(OUTBOX)
    assert defaults.visibility_timeout == timedelta(seconds=60)
    assert defaults.max_attempts == 5
    assert defaults.backoff_base == timedelta(seconds=5)


def test_default_options_resolve_to_the_queue_defaults_at_the_enqueue_instant() -> None:
    plain = resolve_enqueue(EnqueueOpts(), "emails", NOW)
    assert (plain.priority, plain.run_at, plain.expires_at, plain.max_attempts) == (0, NOW, None, 3)
    outbox = resolve_enqueue(EnqueueOpts(), OUTBOX, NOW)
    assert (outbox.priority, outbox.run_at, outbox.expires_at, outbox.max_attempts) == (0, NOW, None, 5)


def test_per_call_options_override_the_derived_defaults() -> None:
    for queue in ["emails", OUTBOX]:
        stamps = resolve_enqueue(EnqueueOpts(priority=-7, max_attempts=9), queue, NOW)
        assert (stamps.priority, stamps.max_attempts) == (-7, 9)


def test_run_at_comes_from_the_delay_or_is_taken_as_given() -> None:
    assert resolve_enqueue(EnqueueOpts(delay=90), "q", NOW).run_at == NOW + timedelta(seconds=90)
    assert resolve_enqueue(EnqueueOpts(delay=0), "q", NOW).run_at == NOW
    earlier = NOW - timedelta(days=3)
    assert resolve_enqueue(EnqueueOpts(run_at=earlier), "q", NOW).run_at == earlier


def test_a_relative_expiry_counts_from_the_enqueue_instant_not_from_run_at() -> None:
    stamps = resolve_enqueue(EnqueueOpts(delay=10, expires=30), "q", NOW)
    assert stamps.run_at == NOW + timedelta(seconds=10)
    assert stamps.expires_at == NOW + timedelta(seconds=30)


def test_an_absolute_expiry_is_kept() -> None:
    stamps = resolve_enqueue(EnqueueOpts(expires=NOW + timedelta(hours=2)), "q", NOW)
    assert stamps.expires_at == NOW + timedelta(hours=2)


@pytest.mark.parametrize(
    "opts",
    [
        EnqueueOpts(run_at=NOW + timedelta(hours=1), expires=NOW + timedelta(minutes=30)),
        EnqueueOpts(run_at=NOW + timedelta(hours=1), expires=NOW + timedelta(hours=1)),
        EnqueueOpts(expires=NOW - timedelta(seconds=1)),
        EnqueueOpts(expires=NOW),
        EnqueueOpts(delay=60, expires=30),
        EnqueueOpts(delay=60, expires=60),
    ],
)
def test_a_job_that_would_expire_before_it_may_run_is_rejected_at_resolution(opts: EnqueueOpts) -> None:
    with pytest.raises(InvalidOptions, match="expire"):
        resolve_enqueue(opts, "q", NOW)


def test_a_schedule_fire_runs_at_the_fire_instant_with_expiry_relative_to_it() -> None:
    stamps = resolve_schedule(ScheduleOpts(priority=3, expires=45), "reports", NOW)
    assert (stamps.priority, stamps.run_at, stamps.max_attempts) == (3, NOW, 3)
    assert stamps.expires_at == NOW + timedelta(seconds=45)
    assert resolve_schedule(ScheduleOpts(), "reports", NOW).expires_at is None


def test_a_schedule_fire_into_an_outbox_queue_derives_five_attempts() -> None:
    assert resolve_schedule(ScheduleOpts(), OUTBOX, NOW).max_attempts == 5
    assert resolve_schedule(ScheduleOpts(max_attempts=2), OUTBOX, NOW).max_attempts == 2


# -- durations and the retry curve ---------------------------------------------------------------


@pytest.mark.parametrize(
    "limit", [MAX_DURATION, MAX_DURATION.total_seconds(), int(MAX_DURATION.total_seconds())], ids=repr
)
def test_a_duration_of_exactly_the_limit_is_accepted_as_seconds_or_a_timedelta(limit: float | timedelta) -> None:
    assert as_duration(limit, "delay") == timedelta(days=36_500)


@pytest.mark.parametrize(
    "over",
    [
        MAX_DURATION + timedelta(microseconds=1),
        MAX_DURATION.total_seconds() + 1e-6,
        int(MAX_DURATION.total_seconds()) + 1,
        -int(MAX_DURATION.total_seconds()) - 1,
        -1e300,
    ],
    ids=repr,
)
def test_a_duration_past_the_limit_is_refused_with_the_limit_named(over: float | timedelta) -> None:
    with pytest.raises(InvalidOptions, match=r"^delay must be at most 36,500 days \(3153600000 s\), not "):
        as_duration(over, "delay")


def test_durations_accept_seconds_and_timedeltas_up_to_a_hundred_years() -> None:
    assert as_duration(1.5, "x") == timedelta(seconds=1.5)
    assert as_duration(timedelta(minutes=2), "x") == timedelta(minutes=2)
    assert as_duration(MAX_DURATION, "x") == MAX_DURATION
    assert timedelta(days=36500) == MAX_DURATION
    with pytest.raises(InvalidOptions, match="ttl"):
        as_duration(MAX_DURATION + timedelta(seconds=1), "ttl")
    with pytest.raises(InvalidOptions, match="> 0"):
        as_duration(0, "ttl", allow_zero=False)


@pytest.mark.parametrize("queue", ["emails", OUTBOX])
def test_the_retry_curve_doubles_from_five_seconds_and_caps_at_one_hour(queue: str) -> None:
    defaults = queue_defaults(queue)
    delays = [retry_delay(defaults, attempt).total_seconds() for attempt in range(1, 14)]
    assert delays == [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600]


@pytest.mark.parametrize("queue", ["emails", OUTBOX])
def test_the_retry_curve_is_defined_non_decreasing_and_capped_for_every_attempt(queue: str) -> None:
    defaults = queue_defaults(queue)
    delays = [retry_delay(defaults, attempt) for attempt in range(1, 201)]
    assert delays == sorted(delays)
    assert delays[-1] == defaults.backoff_cap
    assert all(defaults.backoff_base <= delay <= defaults.backoff_cap for delay in delays)


@pytest.mark.parametrize("attempt", [45, 46, 63, 64, 65, 1000, INT32_MAX])
def test_the_retry_curve_stays_at_the_cap_however_many_attempts_failed(attempt: int) -> None:
    assert retry_delay(queue_defaults("q"), attempt) == timedelta(hours=1)


@pytest.mark.parametrize("attempt", [0, -1])
def test_the_retry_curve_rejects_attempts_below_one(attempt: int) -> None:
    with pytest.raises(InvalidOptions, match=rf"^attempt must be >= 1, not {attempt}$"):
        retry_delay(queue_defaults("q"), attempt)


# -- queue configuration: each refusal names its argument -------------------------------------------


@pytest.mark.parametrize("field", ["visibility_timeout", "backoff_base", "backoff_cap"])
@pytest.mark.parametrize(("value", "says"), [(0, "must be > 0, not 0"), ("5", "must be seconds or a timedelta")])
def test_a_bad_queue_config_duration_is_refused_naming_it(field: str, value: object, says: str) -> None:
    with pytest.raises(InvalidOptions, match=rf"^{field} {says}"):
        check_queue_config("jobs", **{field: value})


@pytest.mark.parametrize(("field", "value"), [("max_attempts", 0), ("priority", 2**31)])
def test_a_bad_queue_config_int_is_refused_naming_it(field: str, value: int) -> None:
    with pytest.raises(InvalidOptions, match=rf"^{field} must be between "):
        check_queue_config("jobs", **{field: value})


def test_a_retry_curve_may_be_flat_but_its_base_never_exceeds_its_cap() -> None:
    flat = check_queue_config("jobs", backoff_base=10, backoff_cap=10)
    assert flat.backoff_base == flat.backoff_cap == timedelta(seconds=10)
    both = r"^backoff_base \(0:00:10\) must not exceed backoff_cap \(0:00:09\)$"
    with pytest.raises(InvalidOptions, match=both):
        check_queue_config("jobs", backoff_base=10, backoff_cap=9)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"backoff_cap": 1},
            r"^backoff_base \(0:00:05\) must not exceed backoff_cap \(0:00:01\) \(a derived default\)$",
        ),
        (
            {"backoff_base": 7200},
            r"^backoff_base \(2:00:00\) must not exceed backoff_cap \(1:00:00\) \(a derived default\)$",
        ),
    ],
)
def test_a_base_over_a_derived_cap_or_under_a_derived_base_says_which_was_derived(
    given: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidOptions, match=message):
        check_queue_config("jobs", **given)


def test_a_schedule_expiry_past_the_last_instant_is_refused_naming_expires() -> None:
    late = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
    with pytest.raises(
        InvalidOptions, match=r"^expires of 2 days, 0:00:00 from 9999-12-30T23:59:59\.999999\+00:00 is past"
    ):
        resolve_schedule(ScheduleOpts(expires=timedelta(days=2)), "jobs", late)


@pytest.mark.parametrize("value", [0, -1, "60"])
def test_a_jobs_own_visibility_timeout_must_be_a_positive_duration_and_the_refusal_names_it(value: object) -> None:
    with pytest.raises(InvalidOptions, match=r"^visibility_timeout must be "):
        EnqueueOpts(visibility_timeout=value)  # type: ignore[arg-type]
    assert EnqueueOpts(visibility_timeout=30).visibility_timeout == timedelta(seconds=30)


@pytest.mark.parametrize("field", ["delay", "expires"])
def test_a_relative_instant_past_the_last_representable_one_is_refused_naming_it(field: str) -> None:
    late = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
    opts = EnqueueOpts(**{field: timedelta(days=2)})  # type: ignore[arg-type]
    with pytest.raises(
        InvalidOptions, match=rf"^{field} of 2 days, 0:00:00 from 9999-12-30T23:59:59\.999999\+00:00 is past"
    ):
        resolve_enqueue(opts, "jobs", late)


def test_a_jobs_own_visibility_timeout_keeps_every_other_stamp() -> None:
    opts = EnqueueOpts(delay=5, priority=7, max_attempts=2, expires=60, visibility_timeout=30)
    stamps = resolve_enqueue(opts, "jobs", NOW)
    assert (stamps.priority, stamps.run_at, stamps.expires_at, stamps.max_attempts, stamps.visibility) == (
        7,
        NOW + timedelta(seconds=5),
        NOW + timedelta(seconds=60),
        2,
        timedelta(seconds=30),
    )


def test_a_job_expiring_at_the_enqueue_instant_is_dead_on_arrival() -> None:
    with pytest.raises(
        InvalidOptions, match=r"^the job would be dead on arrival: it expires \(2030-01-01T12:00:00\+00:00\)"
    ):
        resolve_enqueue(EnqueueOpts(expires=NOW), "jobs", NOW)


def test_a_stored_config_that_leaves_a_field_unset_keeps_the_derived_value_of_that_field() -> None:
    stored = QueueConfig(visibility_timeout=timedelta(seconds=9), priority=4)
    assert queue_defaults("jobs", stored) == QueueDefaults(
        timedelta(seconds=9), 3, timedelta(seconds=5), timedelta(hours=1), priority=4
    )
    assert queue_defaults(OUTBOX, QueueConfig(max_attempts=8)) == QueueDefaults(
        timedelta(seconds=60), 8, timedelta(seconds=5), timedelta(hours=1)
    )
