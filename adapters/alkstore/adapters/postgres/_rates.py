"""Rate limits as the PostgreSQL engine stores and claims them (ADR 070): a limit as a count and a
period in microseconds, and the parameters of ``claim_rated``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from alkstore import engine as port

from ._cursors import claim_params, full_params

__all__ = ["rate_limit", "rate_params", "rated_claim_params"]

_MICROSECOND = timedelta(microseconds=1)


def rate_limit(count: int | None, per_us: int | None) -> port.RateLimit | None:
    """A stored limit (``None`` when the queue has none)."""
    return None if count is None or per_us is None else port.RateLimit(count, timedelta(microseconds=per_us))


def rate_params(name: str, limit: port.RateLimit | None) -> dict[str, Any]:
    """A limit as the parameters ``<name>_count`` and ``<name>_per_us`` of ``configure_queue``."""
    if limit is None:
        return {f"{name}_count": None, f"{name}_per_us": None}
    return {f"{name}_count": limit.count, f"{name}_per_us": limit.per // _MICROSECOND}


def _every_us(limit: port.RateLimit | None) -> int | None:
    return None if limit is None else limit.interval // _MICROSECOND


def rated_claim_params(request: port.ClaimRequest) -> dict[str, Any]:
    """A claim of a queue with a rate limit as the parameters of ``claim_rated`` (read in full, ADR 070)."""
    return {
        **claim_params(request),
        **full_params(),
        "every_us": _every_us(request.rate),
        "key_every_us": _every_us(request.key_rate),
    }
