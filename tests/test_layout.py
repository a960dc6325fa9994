"""The source tree's shape (ADR 013): the package's halves, and the lint that holds the boundary."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ROOT / "adapters" / "alkstore" / "adapters"


def adapter_names() -> list[str]:
    return sorted(path.name for path in ADAPTERS.iterdir() if (path / "__init__.py").is_file())


def test_the_package_has_its_two_halves_under_core_and_adapters() -> None:
    assert (ROOT / "core" / "alkstore" / "__init__.py").is_file()
    assert (ROOT / "core" / "alkstore" / "py.typed").is_file()
    assert (ADAPTERS / "__init__.py").is_file()
    assert {"memory", "postgres", "cli"} <= set(adapter_names())


def test_every_adapter_has_a_lint_config_that_bans_every_other_adapter() -> None:
    names = adapter_names()
    for name in names:
        config = tomllib.loads((ADAPTERS / name / "ruff.toml").read_text(encoding="utf-8"))
        banned = set(config["lint"]["flake8-tidy-imports"]["banned-api"])
        others = {f"alkstore.adapters.{other}" for other in names if other != name}
        assert others <= banned, f"the {name} adapter may import {sorted(others - banned)}"
        assert f"alkstore.adapters.{name}" not in banned


def test_core_bans_every_adapter_and_the_driver() -> None:
    config = tomllib.loads((ROOT / "core" / "ruff.toml").read_text(encoding="utf-8"))
    banned = set(config["lint"]["flake8-tidy-imports"]["banned-api"])
    assert {"alkstore.adapters", "psycopg", "psycopg_pool"} <= banned


def test_the_adapters_half_refuses_to_be_imported_as_the_package(tmp_path: Path) -> None:
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import alkstore"
    result = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "adapters")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode != 0
    assert "put core/ before adapters/" in result.stderr


def test_mypy_reads_the_source_tree_not_an_installed_copy() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["mypy_path"][:2] == ["core", "adapters"]  # the package halves first; then bench, for its imports
    assert {"core/alkstore", "adapters/alkstore/adapters", "tests", "contract_tests"} <= set(config["files"])


def test_the_package_extends_its_path_near_the_top_where_editors_look_for_it() -> None:
    # jedi treats a package as split across directories only if its first 50 lines say
    # ``extend_path(__path__``; further down, go-to-definition stops finding the adapters.
    head = (ROOT / "core" / "alkstore" / "__init__.py").read_text(encoding="utf-8").splitlines()[:50]
    assert any(line.startswith("__path__ = extend_path(__path__, __name__)") for line in head)
