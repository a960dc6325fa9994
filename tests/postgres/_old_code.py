"""The code of an older schema version, taken from this repository's history, for upgrade tests.

The old code of schema version ``v`` is the last commit on ``HEAD``'s first-parent line whose
newest migration is ``v``: the first parent of the commit on that line that added migration
``v + 1``, unless ``PINNED`` names another (where that commit is a work in progress that cannot
run). It is extracted with ``git archive``, its sync twins generated where its tree has a
generator, and its packages put on ``PYTHONPATH`` ahead of the installed ones, whose
dependencies (and entry points) it runs with.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_MIGRATION = re.compile(r"(?:^|/)migrations/(\d{4})_[a-z0-9_]+\.sql$")


#: Versions whose computed old code cannot run, and the commit taken instead (checked against git by the
#: test): version 5's computed commit merges main into the branch that then wrote migration 6, whose
#: statements were already ahead of its migrations; this is main as that merge found it.
PINNED = {5: "6e642960165eab461482810c7d467e5ec960904b"}


class HistoryMissing(Exception):
    """This checkout lacks the history the old code comes from (no git, not a repository, or shallow)."""


@dataclass(frozen=True, slots=True)
class OldCode:
    """One schema version's code on disk: its commit and the ``PYTHONPATH`` that imports it."""

    version: int
    commit: str
    pythonpath: str


def git(*args: str) -> str:
    """Run git in the repository; its stdout, or ``HistoryMissing`` with git's reason."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False, timeout=60)
    except FileNotFoundError as exc:
        raise HistoryMissing(f"git is not installed: {exc}") from None
    if done.returncode != 0:
        raise HistoryMissing(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode()


def check_history() -> None:
    """Raise ``HistoryMissing`` unless the full history of ``HEAD`` is here."""
    if git("rev-parse", "--is-shallow-repository").strip() != "false":
        raise HistoryMissing(f"{ROOT} is a shallow clone: fetch its full history (git fetch --unshallow)")


def is_ancestor(ancestor: str, commit: str) -> bool:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors."""
    try:
        git("merge-base", "--is-ancestor", ancestor, commit)
    except HistoryMissing:
        return False
    return True


def newest_migration(commit: str) -> int:
    """The newest schema version in ``commit``'s tree (0 for none)."""
    found = [_MIGRATION.search(path) for path in git("ls-tree", "-r", "--name-only", commit).splitlines()]
    return max((int(match[1]) for match in found if match), default=0)


def adder(version: int) -> str:
    """The commit on ``HEAD``'s first-parent line that added migration ``version``."""
    check_history()
    pathspec = f":(glob)**/migrations/{version:04d}_*.sql"
    found = git("log", "--first-parent", "--diff-filter=A", "--format=%H", "HEAD", "--", pathspec).split()
    if not found:
        raise HistoryMissing(f"no commit on HEAD's first-parent line adds migration {version}")
    return found[-1]


def old_commit(version: int) -> str:
    """The old code of ``version``: the pinned commit, else the last on ``HEAD``'s first-parent line."""
    check_history()
    commit = PINNED.get(version) or git("rev-parse", f"{adder(version + 1)}^1").strip()
    if newest_migration(commit) != version:
        raise HistoryMissing(f"{commit} (before migration {version + 1}) has migration {newest_migration(commit)}")
    return commit


def extract(version: int, into: Path) -> OldCode:
    """Extract the old code of ``version`` under ``into`` and make it importable."""
    commit = old_commit(version)
    tree = into / f"v{version}"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "core", "adapters", ".ci"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    generator = tree / ".ci" / "async_to_sync.py"
    if generator.exists():
        subprocess.run([sys.executable, str(generator)], cwd=tree, check=True, capture_output=True, timeout=120)
    if (tree / "core" / "alkstore").is_dir():  # the package's two halves, joined by alkstore's own __path__
        pythonpath = f"{tree / 'core'}:{tree / 'adapters'}"
    else:  # the first layout: core/ is the package alkstore, adapters/ its subpackage alkstore.adapters
        package = tree / "packages" / "alkstore"
        shutil.copytree(tree / "core", package)
        shutil.copytree(tree / "adapters", package / "adapters")
        pythonpath = str(tree / "packages")
    return OldCode(version, commit, pythonpath)
