"""Packaging: the wheel ships exactly the ``alkstore`` package with its entry points, and core needs no driver."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.support import run_probe

ROOT = Path(__file__).resolve().parents[1]
#: What a build never needs from the working tree (caches, virtualenvs, earlier build output).
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*_cache", ".hypothesis"
)


def _expected_package_files() -> set[str]:
    """Every file of core/alkstore (as ``alkstore/…``) and adapters/alkstore/adapters (``alkstore/adapters/…``)."""
    expected = set()
    for source, target in [("core/alkstore", "alkstore"), ("adapters/alkstore/adapters", "alkstore/adapters")]:
        for path in (ROOT / source).rglob("*"):
            if (
                path.is_file()
                and "__pycache__" not in path.parts
                and path.suffix != ".pyc"
                and path.name != "ruff.toml"
            ):
                expected.add(f"{target}/{path.relative_to(ROOT / source).as_posix()}")
    return expected


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel built from a copy of the working tree (so the build leaves nothing behind in it)."""
    source = tmp_path_factory.mktemp("source") / "alkstore"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (path,) = out.glob("alkstore-*.whl")
    return zipfile.ZipFile(path)


def _dist_info(wheel: zipfile.ZipFile) -> str:
    (dist_info,) = {name.split("/")[0] for name in wheel.namelist() if name.split("/")[0].endswith(".dist-info")}
    return dist_info


@pytest.mark.slow
def test_the_wheel_ships_every_module_of_core_and_the_adapters_under_alkstore(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for required in [
        "alkstore/__init__.py",
        "alkstore/py.typed",
        "alkstore/errors.py",
        "alkstore/engine.py",
        "alkstore/adapters/__init__.py",
        "alkstore/adapters/memory/__init__.py",
        "alkstore/adapters/postgres/__init__.py",
        "alkstore/adapters/cli/__init__.py",
    ]:
        assert required in names
    missing = _expected_package_files() - names
    assert not missing, f"files of the source tree missing from the wheel: {sorted(missing)}"


@pytest.mark.slow
def test_the_wheel_ships_the_postgres_migrations(wheel: zipfile.ZipFile) -> None:
    migrations = sorted((ROOT / "adapters" / "alkstore" / "adapters" / "postgres" / "migrations").glob("*.sql"))
    assert migrations, "the source tree has no migrations"
    for migration in migrations:
        assert f"alkstore/adapters/postgres/migrations/{migration.name}" in wheel.namelist()


@pytest.mark.slow
def test_the_wheel_ships_the_postgres_statements(wheel: zipfile.ZipFile) -> None:
    statements = sorted((ROOT / "adapters" / "alkstore" / "adapters" / "postgres" / "statements").glob("*.sql"))
    assert statements, "the source tree has no statements"
    for statement in statements:
        assert f"alkstore/adapters/postgres/statements/{statement.name}" in wheel.namelist()


@pytest.mark.slow
def test_the_wheel_ships_the_dashboards_templates_and_static_files(wheel: zipfile.ZipFile) -> None:
    web = ROOT / "adapters" / "alkstore" / "adapters" / "web"
    shipped = sorted([*(web / "templates").glob("*.html"), *(web / "static").iterdir()])
    assert {path.name for path in shipped} >= {"base.html", "overview.html", "dashboard.css", "dashboard.js"}
    for path in shipped:
        assert f"alkstore/adapters/web/{path.relative_to(web).as_posix()}" in wheel.namelist()


@pytest.mark.slow
def test_the_wheel_has_no_top_level_entry_but_alkstore_and_its_metadata(wheel: zipfile.ZipFile) -> None:
    top_level = {name.split("/")[0] for name in wheel.namelist()}
    assert top_level == {"alkstore", _dist_info(wheel)}
    for stray in ("core", "adapters", "tests", "contract_tests", "bench", "docs", "conftest.py"):
        assert not any(name == stray or name.startswith(f"{stray}/") for name in wheel.namelist())
    assert wheel.read(f"{_dist_info(wheel)}/top_level.txt").decode().split() == ["alkstore"]


@pytest.mark.slow
def test_the_wheel_declares_the_console_script_and_the_engines(wheel: zipfile.ZipFile) -> None:
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel.read(f"{_dist_info(wheel)}/entry_points.txt").decode())
    assert dict(entry_points["console_scripts"]) == {"alkstore": "alkstore.adapters.cli:main"}
    assert dict(entry_points["alkstore.engines"]) == {
        "memory": "alkstore.adapters.memory:open_engine",
        "postgresql": "alkstore.adapters.postgres:open_engine",
        "postgres": "alkstore.adapters.postgres:open_engine",
        "sqlite": "alkstore.adapters.sqlite:open_engine",
    }
    assert dict(entry_points["alkstore.commands"]) == {"web": "alkstore.adapters.web._command:add_commands"}


@pytest.mark.slow
def test_the_wheel_metadata_names_the_runtime_dependencies_and_extras(wheel: zipfile.ZipFile) -> None:
    metadata = Parser().parsestr(wheel.read(f"{_dist_info(wheel)}/METADATA").decode())
    assert metadata["Name"] == "alkstore"
    assert metadata["Requires-Python"] == ">=3.11"
    requires = metadata.get_all("Requires-Dist") or []
    runtime = {req.split(";")[0].split(">")[0].split("=")[0].strip() for req in requires if "extra ==" not in req}
    assert runtime == {"psycopg[binary]", "psycopg-pool"}
    assert {"test", "dev", "otel", "web", "django"} <= set(metadata.get_all("Provides-Extra") or [])
    web = {
        req.split(";")[0].split(">")[0].strip() for req in requires if req.replace('"', "'").endswith("extra == 'web'")
    }
    assert web == {"starlette", "jinja2", "uvicorn"}


# -- core without the driver -----------------------------------------------------------------------

_WITHOUT_PSYCOPG = textwrap.dedent(
    """
    import json, sys

    attempts = []

    class BlockPsycopg:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0].startswith("psycopg"):
                attempts.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, BlockPsycopg())

    import alkstore
    adapters_on_import = sorted(m for m in sys.modules if m.startswith("alkstore.adapters"))
    with alkstore.open("memory://") as store:
        queue = store.queue("q")
        job_id = queue.enqueue({"hello": "world"})
        job = queue.claim("worker")
        job.ack()
        store.schedule("s", "@every 1s", "q")
        store.outbox("mail").enqueue(b"raw")
        delivered = []
        store.outbox("mail").run_once("worker", lambda payload, job: delivered.append(payload))
    attempts_before_probe = list(attempts)
    loaded = sorted(m for m in sys.modules if m.split(".")[0].startswith("psycopg"))
    try:
        import psycopg
    except ImportError:
        probe_blocked = True
    else:
        probe_blocked = False
    print(json.dumps({
        "adapters_on_import": adapters_on_import,
        "claimed": job.id == job_id and job.payload == {"hello": "world"},
        "delivered": [d.decode() for d in delivered],
        "attempts": attempts_before_probe,
        "loaded": loaded,
        "probe_blocked": probe_blocked,
    }))
    """
)


def test_core_and_the_memory_engine_work_without_psycopg(tmp_path: Path) -> None:
    report = run_probe(_WITHOUT_PSYCOPG, tmp_path)
    assert report["probe_blocked"], "the psycopg blocker did not work, so this test proves nothing"
    assert report["attempts"] == [], "core or the memory engine tried to import psycopg"
    assert report["loaded"] == []
    assert report["adapters_on_import"] == [], "import alkstore loaded an adapter"
    assert report["claimed"]
    assert report["delivered"] == ["raw"]
