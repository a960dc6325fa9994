"""CHANGELOG.md keeps up with the migrations: every schema version has an entry saying how to roll it out.

A new migration without an entry, or an entry that does not say whether it is online and in
which order to roll it out, fails here.
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
