"""A Django project whose database is SQLite, served by the backend through the same settings (ADR 064):
jobs enqueued inside ``atomic()`` commit or roll back with it on Django's own connection to the file, and the
real ``manage.py alkstore_worker`` runs them; ``get_result`` reads the outcome.

Every step is a ``manage.py`` command in a child process on ``settings_sqlite`` (this process runs the
PostgreSQL settings), sharing one file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import PATIENCE

pytestmark = pytest.mark.slow

MANAGE = Path(__file__).with_name("manage.py")

#: Enqueue four tasks: one inside an atomic block that commits (with an order), one outside any, one from
#: async code (``aenqueue``), and one inside an atomic block that rolls back (with its order), last: on
#: SQLite a rolled-back job's id is the file's counter's, rolled back with it, so the next job would take it
#: again. Print the ids and the orders.
ENQUEUE = """
import json, os
from asgiref.sync import async_to_sync
from django.db import transaction
from tests.django.project.shop.models import Order
from tests.django.project.shop.tasks import write
out = os.environ["ALKSTORE_DJANGO_GIVEN"]

class Undo(Exception):
    pass

with transaction.atomic():
    Order.objects.create(email="kept@example.com")
    kept = write.enqueue(out + "/kept", text="committed")
alone = write.enqueue(out + "/alone", text="alone")
later = async_to_sync(write.aenqueue)(out + "/later", text="from async")  # on the loop's AsyncStore
try:
    with transaction.atomic():
        Order.objects.create(email="undone@example.com")
        undone = write.enqueue(out + "/undone", text="rolled back")
        raise Undo
except Undo:
    pass
print(json.dumps({"kept": kept.id, "undone": undone.id, "alone": alone.id, "later": later.id,
                  "orders": sorted(Order.objects.values_list("email", flat=True))}))
"""

#: Each id's ``get_result``: its status and return value, or ``None`` for one that does not exist.
RESULTS = """
import json, os
from django.tasks.exceptions import TaskResultDoesNotExist
from tests.django.project.shop.tasks import write

def read(result_id):
    try:
        result = write.get_result(result_id)
    except TaskResultDoesNotExist:
        return None
    value = result.return_value if result.is_finished else None
    return [result.status.name, value, len(result.worker_ids)]

given = json.loads(os.environ["ALKSTORE_DJANGO_GIVEN"])
print(json.dumps({name: read(result_id) for name, result_id in given.items()}))
"""


def manage(database: Path, *args: str, given: str = "", fails: bool = False) -> str:
    """``manage.py`` with ``args`` on the SQLite project of ``database`` (``given`` in the environment, for a
    script): its stdout (a failure shows its stderr), or its stderr when it is to fail."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django.project.settings_sqlite",
        "ALKSTORE_DJANGO_SQLITE": str(database),
        "ALKSTORE_DJANGO_GIVEN": given,
        "PYTHONUNBUFFERED": "1",
    }
    done = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=PATIENCE * 4,  # a guard against a hang only
    )
    if fails:
        assert done.returncode != 0, done.stdout
        return done.stderr
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_sqlite_project_enqueues_in_its_transactions_and_the_worker_runs_what_committed(tmp_path: Path) -> None:
    database, out = tmp_path / "db.sqlite3", tmp_path / "out"
    out.mkdir()
    assert "no issues" in manage(database, "check")  # no alkstore.E003: SQLite is served
    manage(database, "migrate", "--run-syncdb", "--verbosity", "0")
    assert "no roles" in manage(database, "alkstore_migrate", "--grant", "app", fails=True)
    assert "migrated to the current schema version" in manage(database, "alkstore_migrate")
    assert "already at the current schema version" in manage(database, "alkstore_migrate")
    enqueued = json.loads(manage(database, "shell", "--no-imports", "-c", ENQUEUE, given=str(out)).splitlines()[-1])
    assert enqueued["orders"] == ["kept@example.com"]
    ids = {name: enqueued[name] for name in ("kept", "undone", "alone", "later")}
    assert len(set(ids.values())) == 4

    before = json.loads(
        manage(database, "shell", "--no-imports", "-c", RESULTS, given=json.dumps(ids)).splitlines()[-1]
    )
    ready = ["READY", None, 0]
    assert before == {"kept": ready, "undone": None, "alone": ready, "later": ready}

    ran = manage(database, "alkstore_worker", "--queues", "default", "--batch")
    assert "serving default" in ran

    after = json.loads(manage(database, "shell", "--no-imports", "-c", RESULTS, given=json.dumps(ids)).splitlines()[-1])
    assert after == {
        "kept": ["SUCCESSFUL", "committed", 1],
        "undone": None,
        "alone": ["SUCCESSFUL", "alone", 1],
        "later": ["SUCCESSFUL", "from async", 1],
    }
    assert (out / "kept").read_text(encoding="utf-8") == "committed"
    assert (out / "alone").read_text(encoding="utf-8") == "alone"
    assert (out / "later").read_text(encoding="utf-8") == "from async"
    assert not (out / "undone").exists()
