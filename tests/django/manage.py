"""``manage.py`` of the test project: run from anywhere, it imports the project from the repository root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
