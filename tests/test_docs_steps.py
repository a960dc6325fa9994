"""docs/steps.md cannot rot: its example runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._docs import block


def test_the_steps_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block("docs/steps.md", 'store.emit("shipped:42"'), encoding="utf-8")
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
