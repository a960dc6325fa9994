"""The Postgres engine's options: checked, all of them, before any connection is made."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from alkstore.engine import SCHEDULER_LEASE, redact
from alkstore.errors import InvalidOptions

from ._cursors import DEFAULT_BACKSTOP

__all__ = ["SCHEMES", "EngineOptions", "parse_options"]

#: The URL schemes this engine answers to (``postgresql+psycopg`` is SQLAlchemy's spelling).
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
DEFAULT_SCHEMA = "alkstore"
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Half the scheduler's lease (ADR 036): a leader sharing the pool gets a connection, or gives up
#: waiting, while its lease still holds.
DEFAULT_POOL_TIMEOUT = SCHEDULER_LEASE.total_seconds() / 2
#: psycopg's own default: a statement is prepared on the server after this many executions.
DEFAULT_PREPARE_THRESHOLD = 5
#: PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN - 1).
_MAX_IDENTIFIER_BYTES = 63


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Everything a ``PostgresEngine`` is opened with, validated."""

    url: str
    schema: str
    min_size: int
    max_size: int
    migrate: bool
    connect_timeout: float
    pool_timeout: float
    prepare_threshold: int | None
    listen_url: str
    listen_max_size: int
    grant: tuple[str, ...]
    claim_backstop: float

    @property
    def max_connections(self) -> int:
        """The most connections a store holds at once (ADR 019): both pools full.

        ``open`` checks the schema and samples the clock on one connection of its own, closed
        before the pools open; later clock samples borrow from the main pool, parked claims
        from the listening pool.
        """
        return self.max_size + self.listen_max_size

    @property
    def connect_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of every connection this engine opens."""
        # libpq takes whole seconds (and treats anything below 2 as 2).
        return {
            "autocommit": True,
            "connect_timeout": max(2, math.ceil(self.connect_timeout)),
            "prepare_threshold": self.prepare_threshold,
        }


_NAMES = (
    "schema",
    "min_size",
    "max_size",
    "migrate",
    "connect_timeout",
    "pool_timeout",
    "prepare_threshold",
    "listen_url",
    "listen_max_size",
    "grant",
    "claim_backstop",
)
_UNSET: Any = object()


def parse_options(url: str, options: Mapping[str, Any]) -> EngineOptions:
    """Check ``url`` and every option; ``InvalidOptions`` names the first one that is wrong."""
    unknown = sorted(set(options) - set(_NAMES))
    if unknown:
        raise InvalidOptions(
            f"unknown option(s) for the postgres engine: {', '.join(unknown)} (known: {', '.join(_NAMES)})"
        )
    url = _libpq_url(url)
    params = _check_url(url, "the URL")
    schema = _check_schema(options.get("schema", DEFAULT_SCHEMA))
    min_size = _check_int(options.get("min_size", DEFAULT_MIN_SIZE), "min_size", 0)
    max_size = _check_int(options.get("max_size", DEFAULT_MAX_SIZE), "max_size", max(1, min_size))
    migrate = options.get("migrate", False)
    if not isinstance(migrate, bool):
        raise InvalidOptions(f"migrate must be a bool, not {type(migrate).__name__}")
    connect_timeout = options.get("connect_timeout")
    if connect_timeout is None:
        connect_timeout = _url_connect_timeout(params)
    prepare_threshold = options.get("prepare_threshold", DEFAULT_PREPARE_THRESHOLD)
    if prepare_threshold is not None:
        prepare_threshold = _check_int(prepare_threshold, "prepare_threshold", 0)
    listen_url = options.get("listen_url")
    if listen_url is None:
        listen_url = url
    else:
        listen_url = _libpq_url(listen_url)
        _check_url(listen_url, "listen_url")
    return EngineOptions(
        url=url,
        schema=schema,
        min_size=min_size,
        max_size=max_size,
        migrate=migrate,
        connect_timeout=_check_seconds(connect_timeout, "connect_timeout"),
        pool_timeout=_check_pool_timeout(options.get("pool_timeout", DEFAULT_POOL_TIMEOUT)),
        prepare_threshold=prepare_threshold,
        listen_url=listen_url,
        listen_max_size=_check_int(options.get("listen_max_size", max_size), "listen_max_size", 1),
        grant=_check_roles(options.get("grant", ())),
        claim_backstop=_check_backstop(options.get("claim_backstop", DEFAULT_BACKSTOP)),
    )


def _libpq_url(url: object) -> str:
    """A URL as libpq takes it: SQLAlchemy's ``postgresql+psycopg://`` is plain ``postgresql://``."""
    if not isinstance(url, str):
        raise InvalidOptions(f"the URL must be a str, not {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    dialect, plus, driver = scheme.lower().partition("+")
    if sep and plus:
        if dialect not in ("postgresql", "postgres") or driver != "psycopg":
            raise InvalidOptions(
                f"the postgres engine runs on psycopg: use postgresql:// or postgresql+psycopg://, not {scheme}://"
            )
        return "postgresql://" + rest
    return url


def _check_url(url: str, what: str) -> Mapping[str, Any]:
    if "://" in url:
        scheme = url.split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise InvalidOptions(f"the postgres engine takes postgresql:// URLs, not {redact(url)!r}")
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise InvalidOptions(f"invalid PostgreSQL URL in {what} ({redact(url)!r}): {exc}") from exc


def _url_connect_timeout(params: Mapping[str, Any]) -> float:
    value = params.get("connect_timeout")
    if not value:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        return float(value)
    except ValueError as exc:
        raise InvalidOptions(f"the URL's connect_timeout is not a number of seconds: {value!r}") from exc


def _check_schema(schema: object) -> str:
    if not isinstance(schema, str):
        raise InvalidOptions(f"schema must be a str, not {type(schema).__name__}")
    _check_identifier(schema, "schema")
    if schema.startswith("pg_"):
        raise InvalidOptions(f"schema {schema!r}: names starting with 'pg_' are reserved by PostgreSQL")
    return schema


def _check_identifier(name: str, what: str) -> None:
    """A name PostgreSQL keeps as given: 1 to 63 bytes of UTF-8, no NUL, no lone surrogate."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if not 0 < size <= _MAX_IDENTIFIER_BYTES:
        raise InvalidOptions(f"{what} must be 1 to {_MAX_IDENTIFIER_BYTES} bytes of UTF-8, not {size}: {name!r}")
    if "\x00" in name or any(0xD800 <= ord(char) <= 0xDFFF for char in name):
        raise InvalidOptions(f"{what} {name!r} contains a NUL or a lone surrogate")


def _check_roles(grant: object) -> tuple[str, ...]:
    """``grant``: a role name, or several, that migrating makes application roles of the schema."""
    roles = (grant,) if isinstance(grant, str) else grant
    if not isinstance(roles, list | tuple):
        raise InvalidOptions(f"grant must be a role name or a list of them, not {type(grant).__name__}")
    for role in roles:
        if not isinstance(role, str):
            raise InvalidOptions(f"grant must name roles as str, not {type(role).__name__}")
        _check_identifier(role, "a role name in grant")
    return tuple(dict.fromkeys(roles))


def _check_int(value: object, what: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be an int, not {type(value).__name__}")
    if value < low:
        raise InvalidOptions(f"{what} must be at least {low}, not {value}")
    return value


def _check_pool_timeout(value: object) -> float:
    """``pool_timeout``: under the scheduler's lease, which any store may lead under (ADR 036)."""
    seconds = _check_seconds(value, "pool_timeout")
    lease = SCHEDULER_LEASE.total_seconds()
    if seconds >= lease:
        raise InvalidOptions(
            f"pool_timeout must be under the scheduler's {lease:g} s lease, not {value!r}: a leader waiting"
            f" that long for a connection would outlive its lease (default {DEFAULT_POOL_TIMEOUT:g} s)"
        )
    return seconds


def _check_backstop(value: object) -> float:
    """``claim_backstop``: seconds between a queue's claims that read behind its cursor (ADRs 061, 067); 0: all full."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidOptions(f"claim_backstop must be seconds (int or float), not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise InvalidOptions(f"claim_backstop must be a finite number of seconds, 0 or more, not {value!r}")
    return float(value)


def _check_seconds(value: object, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be seconds (int or float), not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptions(f"{what} must be a positive number of seconds, not {value!r}")
    return float(value)
