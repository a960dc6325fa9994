"""docs/async.md cannot rot: its Python examples run as written."""

from __future__ import annotations

from pathlib import Path

from tests._docs import block, run_script


def test_the_example_runs_as_written(tmp_path: Path) -> None:
    result = run_script(block("docs/async.md", "asyncio.run(main())"), tmp_path)
    assert result.stderr == ""
