"""The ``alkstore.adapters.django`` application: importable without Django, passing Django's own checks, its
commands saying what they did."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from alkstore.adapters.postgres.testing import LOCAL_DSN, drop_schema, find_server, unique_schema
from tests._proc import run

pytestmark = pytest.mark.postgres

MANAGE = Path(__file__).with_name("manage.py")


def test_importing_the_package_imports_nothing_of_django() -> None:
    code = "import sys, alkstore.adapters.django; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_project_passes_djangos_system_checks_with_the_backend_configured() -> None:
    done = run([sys.executable, str(MANAGE), "check", "--fail-level", "WARNING"])
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_the_commands_are_listed_by_manage_py() -> None:
    done = run([sys.executable, str(MANAGE), "help"])
    assert "alkstore_migrate" in done.stdout
    assert "alkstore_worker" in done.stdout


def test_alkstore_migrate_says_it_migrated_a_fresh_schema_and_then_that_it_was_current() -> None:
    fresh = unique_schema("djnew")
    default = settings.TASKS["default"]
    tasks = {**settings.TASKS, "fresh": {**default, "OPTIONS": {**default["OPTIONS"], "schema": fresh}}}
    said: list[str] = []
    try:
        with override_settings(TASKS=tasks):
            for _ in range(2):
                out = io.StringIO()
                call_command("alkstore_migrate", backend="fresh", stdout=out)
                said.append(out.getvalue())
    finally:
        drop_schema(find_server()[0] or LOCAL_DSN, fresh)
    where = f"alkstore schema {fresh!r} on database 'default'"
    assert said == [
        f"{where} migrated to the current schema version\n",
        f"{where} is already at the current schema version\n",
    ]
