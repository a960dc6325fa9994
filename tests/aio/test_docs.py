"""docs/async.md cannot rot: its Python examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "async.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def examples() -> list[str]:
    return FENCE.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_its_example() -> None:
    assert examples(), "docs/async.md lost its runnable example"


@pytest.mark.parametrize("index", range(len(examples())))
def test_every_example_runs_as_written(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(examples()[index], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
