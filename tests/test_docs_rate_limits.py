"""The rate limits page's example runs as written (docs/rate-limits.md)."""

from __future__ import annotations

from tests._docs import block

PAGE = "docs/rate-limits.md"


def test_the_rate_limits_example_runs_as_written() -> None:
    exec(compile(block(PAGE, "calls.configure(rate=RateLimit(10, per=1)"), PAGE, "exec"), {})
