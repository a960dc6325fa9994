"""The ``alkstore.adapters.django`` application: importable without Django, passing Django's own checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
