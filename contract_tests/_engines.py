"""The engines under contract: how the suite finds them and opens a fresh, isolated store on each.

An engine is reached only the way a user reaches it: ``alkstore.open(url, clock=…)``. Every
store the suite opens is private to one test (or one Hypothesis example): a new in-memory
store, or a Postgres store in a schema of its own that is dropped when the store closes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata

import alkstore
from alkstore import Clock, Codec, Store

__all__ = [
    "ENGINE_GROUP",
    "ENGINE_NAMES",
    "T0",
    "EngineTarget",
    "entry_point_problem",
    "memory_target",
    "postgres_target",
    "under_ci",
]

ENGINE_GROUP = "alkstore.engines"
#: The engines every contract test runs on; the name is the ``engine`` fixture's parameter.
ENGINE_NAMES = ("memory", "postgres")
#: Where every manual clock starts: a microsecond part, so stamps prove microsecond round trips.
T0 = datetime(2031, 5, 17, 9, 30, 0, 123456, tzinfo=UTC)
#: The Postgres pool bound for tests: several suites share one server (max_connections=100).
PG_MAX_SIZE = 4


def under_ci() -> bool:
    """Whether this run is CI, where a missing engine is a failure rather than a skip."""
    return os.environ.get("CI", "").lower() == "true"


@dataclass(frozen=True)
class EngineTarget:
    """One engine the suite runs against: ``store(clock)`` opens a fresh, private store on it."""

    name: str
    opener: Callable[[Clock, Codec | None], tuple[Store, Callable[[], None]]]

    @contextmanager
    def store(self, clock: Clock, codec: Codec | None = None) -> Iterator[Store]:
        """A fresh store on this engine driven by ``clock``; closed (and its storage dropped) after."""
        store, cleanup = self.opener(clock, codec)
        try:
            yield store
        finally:
            cleanup()

    def __repr__(self) -> str:
        return f"<contract engine {self.name}>"


def entry_point_problem(scheme: str) -> str | None:
    """None if the ``alkstore.engines`` entry point for ``scheme`` loads, else why it does not."""
    found = metadata.entry_points(group=ENGINE_GROUP, name=scheme)
    if not found:
        return f"no {ENGINE_GROUP!r} entry point named {scheme!r} is installed"
    try:
        next(iter(found)).load()
    except (ImportError, AttributeError) as exc:
        return f"the {scheme!r} engine does not load: {type(exc).__name__}: {exc}"
    return None


def memory_target() -> EngineTarget:
    """The embedded engine: every store is a new, empty memory."""

    def opener(clock: Clock, codec: Codec | None) -> tuple[Store, Callable[[], None]]:
        store = alkstore.open("memory://", clock=clock, codec=codec)
        return store, store.close

    return EngineTarget("memory", opener)


def postgres_target(
    dsn: str,
    unique_schema: Callable[[str], str],
    drop_schema: Callable[[str, str], None],
) -> EngineTarget:
    """The Postgres engine: every store lives in a fresh schema, migrated on open, dropped on close."""

    def opener(clock: Clock, codec: Codec | None) -> tuple[Store, Callable[[], None]]:
        schema = unique_schema("ct")
        try:
            store = alkstore.open(dsn, schema=schema, migrate=True, clock=clock, codec=codec, max_size=PG_MAX_SIZE)
        except BaseException:
            drop_schema(dsn, schema)
            raise

        def cleanup() -> None:
            try:
                store.close()
            finally:
                drop_schema(dsn, schema)

        return store, cleanup

    return EngineTarget("postgres", opener)
