"""The schema's versions: the SQL files in ``migrations/``, and the rules about a stored version.

Each file ``NNNN_name.sql`` is one schema version; ``_migrate_async`` (and its sync twin) applies
them and checks a stored version against these.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from functools import cache
from importlib import resources

from alkstore.engine import redact
from alkstore.errors import DatabaseError, SchemaOutOfDate

__all__ = ["Migration", "current_version", "lock_key", "migrations", "out_of_date", "refuse_newer"]

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, its name and its SQL."""

    version: int
    name: str
    text: str


@cache
def migrations() -> tuple[Migration, ...]:
    """The packaged migrations in version order; their numbers run 1, 2, … without a gap."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        match = _FILE.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"alkstore's migrations are not numbered 1..n: {versions}")
    return tuple(found)


def current_version() -> int:
    """The schema version this code needs."""
    return migrations()[-1].version


def lock_key(schema: str) -> int:
    """The advisory lock key that serialises migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.sha256(f"alkstore migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def refuse_newer(have: int, schema: str) -> None:
    want = current_version()
    if have > want:
        raise DatabaseError(
            f"schema {schema!r} is at version {have}, newer than this alkstore knows (version {want}); "
            "upgrade alkstore before using this database"
        )


def out_of_date(have: int, schema: str, url: str) -> SchemaOutOfDate | None:
    """The error for a stored version ``have`` this code cannot use (``None`` when it is current), naming
    the command to run."""
    want = current_version()
    refuse_newer(have, schema)
    if have == want:
        return None
    state = "has not been migrated" if have == 0 else f"is at version {have}"
    command = f"alkstore migrate --url {shlex.quote(redact(url))} --schema {shlex.quote(schema)}"
    return SchemaOutOfDate(
        f"schema {schema!r} {state}, and this alkstore needs version {want}. Run `{command}`, "
        "or open with `alkstore.open(url, migrate=True)` (which calls `store.migrate()`)."
    )
