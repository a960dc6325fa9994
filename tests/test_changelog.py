"""CHANGELOG.md keeps up with the migrations: every schema version has an entry saying how to roll it out.

A new migration without an entry, or an entry that does not say whether it is online and in
which order to roll it out, fails here; so does an entry calling a migration online whose SQL
scans or rewrites a table an earlier version created (an index built without ``CONCURRENTLY``,
a constraint validated at once, a column's type changed or set ``NOT NULL``, a column added with
a volatile default). The rollout order every entry
gives is the one ``tests/postgres/test_rolling_upgrade.py`` runs from each older version (ADR 041).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS = ROOT / "adapters" / "alkstore" / "adapters" / "postgres" / "migrations"
CHANGELOG = ROOT / "CHANGELOG.md"

_HEADING = re.compile(r"^## (?P<title>.+)$", re.MULTILINE)
_VERSION = re.compile(r"schema version (\d+)")
_ONLINE = re.compile(r"^- \*\*Online:\*\* (yes|no)\b", re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")
_BODY = re.compile(r"\$(\w*)\$.*?\$\1\$", re.DOTALL)  # a function's body runs later, not in the migration
_PARENS = re.compile(r"\([^()]*\)")
_TABLE = re.compile(r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_INDEX = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY\b)(?:IF\s+NOT\s+EXISTS\s+)?(?:\w+\s+)?ON\s+(?:ONLY\s+)?(\w+)",
    re.IGNORECASE,
)
_ALTER = re.compile(r"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(\w+)\s+(.*)$", re.IGNORECASE | re.DOTALL)
_VOLATILE = r"(?:now|clock_timestamp|statement_timestamp|timeofday|random|gen_random_uuid|uuid_generate_v\d|nextval)"
#: Clauses of ``ALTER TABLE`` (parentheses removed) that hold the table while they read every row of
#: it (validating, or building an index) or rewrite it.
_HOLDING = tuple(
    re.compile(pattern, re.IGNORECASE | re.DOTALL)
    for pattern in (
        r"^ADD\s+(?:CONSTRAINT\s+\w+\s+)?(?:UNIQUE|PRIMARY\s+KEY|EXCLUDE)\b",
        r"^ADD\s+(?:CONSTRAINT\s+\w+\s+)?(?:CHECK|FOREIGN\s+KEY)\b(?!.*\bNOT\s+VALID\b)",
        r"^ADD\s+(?:COLUMN\s+)?.*\b(?:UNIQUE|PRIMARY\s+KEY)\b",
        rf"^ADD\s+(?:COLUMN\s+)?.*\bDEFAULT\s+{_VOLATILE}\b",
        r"^ALTER\s+(?:COLUMN\s+)?\w+\s+(?:SET\s+NOT\s+NULL|(?:SET\s+DATA\s+)?TYPE)\b",
        r"^SET\s+(?:LOGGED|UNLOGGED|TABLESPACE)\b",
    )
)
_ROLLOUT = re.compile(
    r"^- \*\*Rollout:\*\* (migrate first, then new workers|new workers first|either order)\b", re.MULTILINE
)


def sections(text: str) -> dict[str, str]:
    """Each ``## `` heading of ``text`` with the body under it."""
    headings = list(_HEADING.finditer(text))
    ends = [match.start() for match in headings[1:]] + [len(text)]
    return {match["title"]: text[match.end() : end] for match, end in zip(headings, ends, strict=True)}


def migration_versions() -> list[int]:
    return sorted(int(path.name.split("_", 1)[0]) for path in MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql"))


def sql(version: int) -> str:
    """Migration ``version``'s SQL without its comments."""
    [path] = MIGRATIONS.glob(f"{version:04d}_*.sql")
    return _COMMENT.sub("", path.read_text())


def scans(text: str) -> set[str]:
    """The tables the SQL ``text`` scans or rewrites while it holds them."""
    found = set()
    for statement in (" ".join(part.split()) for part in _BODY.sub("", text).split(";")):
        if index := _INDEX.match(statement):
            found.add(index[1])
        elif alter := _ALTER.match(statement):
            clauses = alter[2]
            while _PARENS.search(clauses):
                clauses = _PARENS.sub("", clauses)
            if any(pattern.match(clause.strip()) for clause in clauses.split(",") for pattern in _HOLDING):
                found.add(alter[1])
    return found


def scanned_tables(version: int) -> set[str]:
    """The tables created before ``version`` that its migration scans or rewrites while it holds them."""
    earlier = {table for older in range(1, version) for table in _TABLE.findall(sql(older))}
    return scans(sql(version)) & earlier


def entry(version: int) -> str:
    """The body of the CHANGELOG section for schema ``version``."""
    [body] = [body for title, body in sections(CHANGELOG.read_text()).items() if f"schema version {version} " in title]
    return body


def test_there_are_migrations_to_check() -> None:
    assert migration_versions()[:1] == [1]


@pytest.mark.parametrize("version", migration_versions())
def test_every_migrations_schema_version_has_a_changelog_entry_naming_its_file(version: int) -> None:
    [path] = MIGRATIONS.glob(f"{version:04d}_*.sql")
    titles = [title for title in sections(CHANGELOG.read_text()) if f"schema version {version} " in title + " "]
    assert titles, f"CHANGELOG.md has no section for schema version {version} ({path.name})"
    assert any(path.name in title for title in titles), f"no section for schema version {version} names {path.name}"


def test_every_changelog_entry_names_its_schema_version_whether_it_is_online_and_its_rollout_order() -> None:
    entries = sections(CHANGELOG.read_text())
    assert entries
    for title, body in entries.items():
        assert _VERSION.search(title), f"{title!r} does not name its schema version"
        assert len(_ONLINE.findall(body)) == 1, f"{title!r} does not say once whether it is online (yes/no)"
        assert len(_ROLLOUT.findall(body)) == 1, f"{title!r} does not state one rollout order"


def test_the_newest_entry_is_for_the_newest_schema_version() -> None:
    first = next(iter(sections(CHANGELOG.read_text())))
    match = _VERSION.search(first)
    assert match is not None
    assert int(match[1]) == migration_versions()[-1]


@pytest.mark.parametrize("version", migration_versions())
def test_an_entry_calls_its_migration_online_only_if_it_scans_no_busy_table(version: int) -> None:
    scanned = scanned_tables(version)
    online = _ONLINE.findall(entry(version))
    assert online == ["no" if scanned else "yes"], f"version {version} scans or rewrites {sorted(scanned) or 'nothing'}"


def test_the_check_of_online_finds_what_holds_a_busy_table() -> None:
    """Version 3 builds indexes on ``jobs`` without ``CONCURRENTLY``; version 1 indexes only its own new tables."""
    assert scanned_tables(3) == {"jobs"}
    assert scanned_tables(1) == set()
    assert scanned_tables(5) == set()
    assert scans("CREATE INDEX CONCURRENTLY jobs_x ON jobs (queue);") == set()
    assert scans("ALTER TABLE jobs ALTER COLUMN queue TYPE varchar(200);") == {"jobs"}
    assert scans("ALTER TABLE jobs ADD COLUMN seen timestamptz NOT NULL DEFAULT now();") == {"jobs"}
    assert scans("ALTER TABLE jobs ADD COLUMN seen boolean NOT NULL DEFAULT false, ADD COLUMN n int;") == set()
    assert scans("ALTER TABLE jobs ADD CONSTRAINT c CHECK (attempts >= 0) NOT VALID;") == set()
    assert scans("ALTER TABLE jobs ADD CONSTRAINT c CHECK (attempts >= 0);") == {"jobs"}
    assert scans("ALTER TABLE jobs ADD COLUMN k text UNIQUE;") == {"jobs"}
    assert scans("ALTER TABLE jobs ALTER COLUMN task SET NOT NULL;") == {"jobs"}
    assert scans("CREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$ CREATE INDEX i ON jobs (id) $$;") == set()
