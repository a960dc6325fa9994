"""docs/steps.md cannot rot: its example runs as written."""

from __future__ import annotations

from pathlib import Path

from tests._docs import block, run_script


def test_the_steps_example_runs_as_written(tmp_path: Path) -> None:
    result = run_script(block("docs/steps.md", 'store.emit("shipped:42"'), tmp_path)
    assert result.stderr == ""
