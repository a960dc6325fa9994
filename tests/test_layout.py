"""The source tree's shape (ADR 013): the package's halves, and the lint that holds the boundary."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ROOT / "adapters" / "alkstore" / "adapters"


#: What an adapter may import of core: these modules (and whatever they export that is not private).
PUBLIC_CORE = {
    "alkstore",
    "alkstore.display",
    "alkstore.engine",
    "alkstore.errors",
    "alkstore.telemetry",
    "alkstore.testing",
}


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


def _is_private(name: str) -> bool:
    """A leading underscore marks a private module or name; a dunder (``__version__``) is not one."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _core_target(module: str) -> bool:
    """Whether ``module`` (absolute) is in core rather than in the adapters' half."""
    return (module == "alkstore" or module.startswith("alkstore.")) and not (
        module == "alkstore.adapters" or module.startswith("alkstore.adapters.")
    )


def _reaches_into_core(module: str) -> bool:
    """Whether ``module`` is a core module that is not public (``alkstore._tasks``, ``alkstore._x.y``)."""
    return _core_target(module) and any(_is_private(part) for part in module.split(".")[1:])


def private_core_imports(source: str, module: str) -> list[str]:
    """The places where ``source`` (of the module named ``module``) reaches into core's privates:
    ``import alkstore._x``, ``from alkstore._x import y``, ``from alkstore import _x`` (relative
    spellings too), ``importlib.import_module("alkstore._x")``, or ``alkstore._x`` as an attribute."""
    package = module.split(".")[:-1]  # what a relative import starts from (an __init__'s own package)
    tree = ast.parse(source)
    found: list[str] = []
    core_names: set[str] = set()  # the local names bound to a core module
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets.append(alias.name)
                if alias.asname and _core_target(alias.name):
                    core_names.add(alias.asname)
                elif alias.name.split(".")[0] == "alkstore":
                    core_names.add("alkstore")
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            targets.append(origin)
            if _core_target(origin):
                targets += [f"{origin}.{alias.name}" for alias in node.names]
                core_names.update(
                    alias.asname or alias.name for alias in node.names if f"{origin}.{alias.name}" in PUBLIC_CORE
                )
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in {"importlib.import_module", "import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets.append(node.args[0].value)
        if isinstance(node, ast.stmt | ast.expr) and any(_reaches_into_core(target) for target in targets):
            found.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}")
    found += [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and _private_attribute(node, core_names)
    ]
    return found


def _private_attribute(node: ast.Attribute, core_names: set[str]) -> bool:
    """Whether ``node`` names a private attribute under a core module (``alkstore._x``, ``alkstore.port._x``)."""
    if not _is_private(node.attr):
        return False
    value = node.value
    while isinstance(value, ast.Attribute) and not _is_private(value.attr):
        value = value.value
    return isinstance(value, ast.Name) and value.id in core_names


def adapter_modules() -> list[tuple[Path, str]]:
    """Every module under ``adapters/alkstore/adapters`` with its dotted name."""
    return [
        (path, ".".join(path.relative_to(ROOT / "adapters").with_suffix("").parts))
        for path in sorted(ADAPTERS.rglob("*.py"))
    ]


def test_no_adapter_imports_a_private_core_module() -> None:
    # The adapters drive (or implement) core through its public modules only (PUBLIC_CORE); an
    # adapter's own private modules are its business. A name an adapter needs is made public.
    modules = adapter_modules()
    assert len(modules) > 20, "the adapters' modules were not found"
    offences = [
        f"{path.relative_to(ROOT)} {place}"
        for path, module in modules
        for place in private_core_imports(path.read_text(encoding="utf-8"), module)
    ]
    assert not offences, "adapters importing private core modules:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    "line",
    [
        "import alkstore._tasks",
        "import alkstore._tasks as tasks",
        "from alkstore._tasks import Tasks",
        "from alkstore._worker_parts.sub import x",
        "from alkstore import _acompat",
        "from alkstore.engine import _private_helper",
        "from ... import _tasks",
        "from ..._acompat import is_async",
        "import importlib; importlib.import_module('alkstore._tasks')",
        "import alkstore; alkstore._acompat.is_async(f)",
        "import alkstore; alkstore.port._acompat.is_async(f)",
        "from alkstore.worker._parts import IDLE_RECHECK",
        "from alkstore.rules import _names",
        "import alkstore as ak; ak._acompat",
        "from alkstore import engine; engine._orders",
    ],
)
def test_the_private_import_check_catches_every_spelling(line: str) -> None:
    assert private_core_imports(line, "alkstore.adapters.cli._work"), line


@pytest.mark.parametrize(
    "line",
    [
        "import alkstore",
        "from alkstore import Tasks, AsyncWorker, engine",
        "from alkstore.engine import redact",
        "from alkstore.errors import InvalidOptions",
        "import alkstore; alkstore.__version__",
        "from ._sql import CLAIM",
        "from . import _operate",
        "from .. import memory",
        "import alkstore.adapters.postgres._sql",
        "from alkstore.adapters.postgres import _sql",
        "from alkstore.adapters.postgres._sql import CLAIM",
        "import importlib; importlib.import_module('myapp._jobs')",
    ],
)
def test_the_private_import_check_lets_public_and_adapter_imports_through(line: str) -> None:
    assert private_core_imports(line, "alkstore.adapters.cli._work") == [], line


#: The size past which a module says, in its opening docstring, why it is one module.
LONG_MODULE = 500


#: Adapter modules longer than ``LONG_MODULE`` lines, each with the most it may grow to. The list
#: only shrinks: a module split below the limit falls off it, and a new long module fails the test
#: until it is split (or, for a reason its docstring gives, listed here).
LONG_ADAPTER_MODULES = {
    "adapters/alkstore/adapters/django/backend.py": 550,
    "adapters/alkstore/adapters/postgres/_engine.py": 770,
    "adapters/alkstore/adapters/postgres/_engine_async.py": 770,
    "adapters/alkstore/adapters/postgres/_rows.py": 625,
    "adapters/alkstore/adapters/sqlite/_tables.py": 1110,
    "adapters/alkstore/adapters/web/_app.py": 590,
}


def test_no_adapter_module_is_over_500_lines_but_the_listed_ones_within_their_ceilings() -> None:
    lengths = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8").count("\n") for path in ADAPTERS.rglob("*.py")
    }
    long = {name: lines for name, lines in lengths.items() if lines > LONG_MODULE}
    unlisted = sorted(f"{name} ({lines} lines)" for name, lines in long.items() if name not in LONG_ADAPTER_MODULES)
    grown = sorted(
        f"{name} ({lines} lines, at most {LONG_ADAPTER_MODULES[name]})"
        for name, lines in long.items()
        if name in LONG_ADAPTER_MODULES and lines > LONG_ADAPTER_MODULES[name]
    )
    shrunk = sorted(name for name in LONG_ADAPTER_MODULES if lengths.get(name, 0) <= LONG_MODULE)
    assert not unlisted, "adapter modules over 500 lines:\n" + "\n".join(unlisted)
    assert not grown, "listed modules past their ceilings:\n" + "\n".join(grown)
    assert not shrunk, "no longer over 500 lines (take them off the list): " + ", ".join(shrunk)


def test_the_adr_index_lists_every_decision_once() -> None:
    adr = ROOT / "docs" / "adr"
    records = sorted(path.name for path in adr.glob("[0-9][0-9][0-9]-*.md"))
    index = (adr / "README.md").read_text(encoding="utf-8")
    linked = [line.split("](", 1)[1].split(")", 1)[0] for line in index.splitlines() if line.startswith("- [")]
    assert sorted(linked) == records, "docs/adr/README.md lists each record once, under its area"


CORE = ROOT / "core" / "alkstore"

#: Core's concept packages (ADR 062), each with what it may import of core besides itself.
PACKAGES = {
    "port": {"alkstore.errors"},
    "rules": {"alkstore.errors", "alkstore.port"},
    "scheduler": {"alkstore.errors", "alkstore.port", "alkstore.rules"},
    "store": {"alkstore.errors", "alkstore.port", "alkstore.rules", "alkstore.scheduler"},
    "worker": {"alkstore.errors", "alkstore.port", "alkstore.rules", "alkstore.store"},
}


def core_imports(path: Path) -> set[str]:
    """The core modules ``path`` imports (absolute names; ``TYPE_CHECKING`` imports included)."""
    module = ".".join(("alkstore", *path.relative_to(CORE).with_suffix("").parts))
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                named = f"{origin}.{alias.name}"
                found.add(named if (CORE.parent / named.replace(".", "/")).with_suffix(".py").is_file() else origin)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if _core_target(name)}


def test_core_is_a_few_concept_packages_beside_the_public_modules() -> None:
    entries = {path.name for path in CORE.iterdir() if path.name != "__pycache__"}
    packages = {path.name for path in CORE.iterdir() if (path / "__init__.py").is_file()}
    assert packages == set(PACKAGES)
    assert len(entries) <= 13, sorted(entries)
    for name in PACKAGES:
        docstring = ast.get_docstring(ast.parse((CORE / name / "__init__.py").read_text(encoding="utf-8"))) or ""
        assert "May import" in docstring, f"alkstore.{name} says what it may import"


def test_each_core_package_imports_only_the_floors_below_it() -> None:
    offences = []
    for name, allowed in PACKAGES.items():
        for path in sorted((CORE / name).glob("*.py")):
            for target in core_imports(path):
                floor = ".".join(target.split(".")[:2])
                if floor != f"alkstore.{name}" and floor not in allowed:
                    offences.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not offences, "\n".join(offences)


def test_core_has_no_import_circle_type_checking_imports_included() -> None:
    graph = {
        ".".join(("alkstore", *path.relative_to(CORE).with_suffix("").parts)).removesuffix(".__init__"): core_imports(
            path
        )
        for path in CORE.rglob("*.py")
    }
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import circle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done or module not in graph:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_core_module_is_over_500_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)} ({path.read_text(encoding='utf-8').count(chr(10))} lines)"
        for path in sorted(CORE.rglob("*.py"))
        if path.read_text(encoding="utf-8").count("\n") > LONG_MODULE
    ]
    assert not long, "\n".join(long)
