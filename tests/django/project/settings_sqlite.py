"""The test project on SQLite, as Django's development set-up has it: its tables and alkstore's in one file.

The file comes from the environment (``ALKSTORE_DJANGO_SQLITE``), so that the test and the commands it
runs (``manage.py migrate``, ``alkstore_migrate``, ``alkstore_worker``, ``shell``) share it. The same
``TASKS`` settings as on PostgreSQL: ``database`` names the SQLite entry, nothing else changes.
"""

from __future__ import annotations

import os

from .settings import *  # noqa: F403 (the project's settings, its database replaced)
from .settings import TASKS

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("ALKSTORE_DJANGO_SQLITE", "db.sqlite3"),
        # A transaction takes the file's write lock when it begins, as Django's docs advise for writers.
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
}

TASKS = {
    "default": {
        **TASKS["default"],
        "OPTIONS": {"database": "default"},  # the default schema, pool and results; no schedules
    }
}
