"""``manage.py alkstore_migrate``: create or upgrade the alkstore schema of a task backend (ADR 039), and
have its queues keep results as ``OPTIONS["keep_results"]`` says (ADR 046)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore import SchemaOutOfDate
from alkstore.adapters.django._database import SQLITE_ENGINE

from ._backend import alkstore_backend


class Command(BaseCommand):
    help = "Create or upgrade the alkstore schema that a TASKS backend stores its jobs in (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument(
            "--grant",
            action="append",
            default=[],
            metavar="ROLE",
            help="also grant an application role what it needs (repeatable)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        backend = alkstore_backend(options["backend"])
        if options["grant"] and settings.DATABASES.get(backend.database, {}).get("ENGINE") == SQLITE_ENGINE:
            raise CommandError("--grant gives a PostgreSQL role its rights; a SQLite database has no roles")
        # A plain open checks the schema, so one that succeeds means there is nothing to migrate;
        # SchemaOutOfDate means a schema missing or older, which the open with migrate=True brings up.
        try:
            backend.open_store(max_size=1).close()
        except SchemaOutOfDate:
            done = "migrated to the current schema version"
        else:
            done = "is already at the current schema version"
        with backend.open_store(migrate=True, grant=options["grant"], max_size=1) as store:
            backend.configure_queues(store)  # its queues keep results as OPTIONS say (ADR 046)
        self.stdout.write(f"alkstore schema {backend.schema!r} on database {backend.database!r} {done}")
