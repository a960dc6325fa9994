"""The SQLite engine for test suites (see ``alkstore.testing``): a fresh file in a temporary directory per
scratch store, removed with its directory when the store is disposed of."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from alkstore.testing import Scratch, ScratchEngine, ScratchStore

__all__ = ["SCRATCH"]


def _provision() -> Scratch | str:
    def scratch() -> ScratchStore:
        directory = tempfile.mkdtemp(prefix="alkstore-sqlite-")
        path = Path(directory) / "jobs.db"
        return ScratchStore(f"sqlite:///{path}", {}, lambda: shutil.rmtree(directory, ignore_errors=True))

    return scratch


SCRATCH = ScratchEngine("sqlite", "sqlite", _provision)
