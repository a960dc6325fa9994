"""The schema's versions: the SQL files in ``migrations/``, and the rules about a stored version.

Each file ``NNNN_name.sql`` is one schema version; ``_migrate_async`` (and its sync twin) applies
them and checks a stored version against these.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from alkstore.engine import redact
from alkstore.errors import DatabaseError, SchemaOutOfDate

__all__ = ["Migration", "current_version", "exclusive_first", "lock_key", "migrations", "out_of_date", "refuse_newer"]

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
#: What a migration's own statements lock, by how a statement begins: a lock that stops writes but not
#: reads (``CREATE INDEX``: SHARE; ``CREATE TRIGGER``: SHARE ROW EXCLUSIVE), one that stops both (ACCESS
#: EXCLUSIVE), and a table the run creates (nobody else can hold it).
_STOPS_WRITES = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?(?:\w+\s+)?ON\s+(?:ONLY\s+)?(\w+)"
    r"|CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?TRIGGER\s+\w+\s+[^;]*?\bON\s+(\w+)",
    re.IGNORECASE,
)
_STOPS_ALL = re.compile(
    r"(?:ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?|DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?\w+\s+ON\s+"
    r"|TRUNCATE\s+(?:TABLE\s+)?|DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?)(\w+)",
    re.IGNORECASE,
)
_CREATES = re.compile(r"CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_COMMENT = re.compile(r"--[^\n]*")
_BODY = re.compile(r"(\$\w*\$).*?\1", re.DOTALL)


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


def exclusive_first(pending: Sequence[Migration]) -> list[str]:
    """The tables ``pending`` (run in one transaction) locks against writes and later in ACCESS EXCLUSIVE
    mode: ``apply`` locks them in that mode before the first migration, in this order.

    Between the two, a running worker's statement that reads such a table before it writes it (a claim
    sweeps, then updates) holds ACCESS SHARE and waits for ROW EXCLUSIVE behind the migration, which then
    waits for that worker's ACCESS SHARE: a deadlock, on a busy table almost at once, and the server rolls
    one of them back (the migration's index builds with it). Taken first, the exclusive lock waits for
    the running statements to finish instead, and none of theirs waits behind a lock the migration holds.
    """
    exclusive: set[str] = set()  # created by the run, or locked ACCESS EXCLUSIVE by it already
    stopped: set[str] = set()
    upgraded: list[str] = []
    for migration in pending:
        text = _BODY.sub("", _COMMENT.sub("", migration.text))  # function bodies lock nothing as they are made
        for statement in (part.strip() for part in text.split(";")):
            made, writes, every = _CREATES.match(statement), _STOPS_WRITES.match(statement), _STOPS_ALL.match(statement)
            if made is not None:
                exclusive.add(made[1].lower())
            elif writes is not None:
                stopped.add((writes[1] or writes[2]).lower())
            elif every is not None and (table := every[1].lower()) not in exclusive:
                exclusive.add(table)
                if table in stopped:
                    upgraded.append(table)
    return upgraded


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
