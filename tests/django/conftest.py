"""The Django backend's tests: a real Django 6.1 project (tests/django/project) on the local PostgreSQL.

Django 6.1 runs on Python 3.12 and later, so under 3.11 nothing here is collected. Django is set
up here, with a scratch alkstore schema of its own (``ALKSTORE_DJANGO_SCHEMA``, shared with the
worker subprocesses), migrated by ``manage.py alkstore_migrate``, and a scratch schema for
Django's own tables (``ALKSTORE_DJANGO_APP_SCHEMA``: the admin's users and sessions), migrated
by ``manage.py migrate``; both are dropped at the end. The tests use the configured database
itself rather than a test database of pytest-django's, each schema made for this session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

if sys.version_info < (3, 12):
    collect_ignore_glob = ["*"]
else:
    from alkstore.adapters.postgres.testing import LOCAL_DSN, drop_schema, find_server, unique_schema
    from tests.support import under_ci

    os.environ.setdefault("ALKSTORE_DJANGO_SCHEMA", unique_schema("dj"))
    os.environ.setdefault("ALKSTORE_DJANGO_APP_SCHEMA", unique_schema("djapp"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.project.settings")
    import django

    django.setup()

    @pytest.fixture(scope="session")
    def django_db_setup() -> None:
        """The configured database as it is: no test database is created (see ``alkstore_schema``)."""

    @pytest.fixture(scope="session", autouse=True)
    def alkstore_schema(django_db_blocker: Any) -> Iterator[str]:
        """The scratch schemas, migrated through the management commands, dropped after the session."""
        dsn, reason = find_server()
        if dsn is None:
            if under_ci():
                pytest.fail(f"CI=true and no PostgreSQL server: {reason}")
            pytest.skip(reason)
        from django.core.management import call_command
        from django.db import connection

        schema, app_schema = os.environ["ALKSTORE_DJANGO_SCHEMA"], os.environ["ALKSTORE_DJANGO_APP_SCHEMA"]
        with django_db_blocker.unblock():
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE SCHEMA {app_schema}")  # a unique_schema name: a plain identifier
            call_command("migrate", run_syncdb=True, verbosity=0)
            call_command("alkstore_migrate")
        yield schema
        with django_db_blocker.unblock():
            connection.close()
        drop_schema(dsn or LOCAL_DSN, schema)
        drop_schema(dsn or LOCAL_DSN, app_schema)
