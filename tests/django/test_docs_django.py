"""docs/django.md's runnable blocks, and the Django install line (here, where the suite runs on Python 3.12 or
later): the settings pass the checks, the two commands migrate and run a task, the periodic settings and the
admin's URLs are what the test project runs."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.db import transaction
from django.urls import include, path

from alkstore.adapters.django.backend import AlkstoreBackend
from tests._docs import ROOT, block, items_of
from tests._proc import LiveProcess, run
from tests.django.project import urls as project_urls
from tests.django.project.shop.models import Order
from tests.django.test_readme_django import receipts_of
from tests.support import PATIENCE, wait_until

PAGE = "docs/django.md"
MANAGE = Path(__file__).with_name("manage.py")
INSTALL = "pip install '.[django]'"


def test_the_django_install_line_resolves_from_the_checkout() -> None:
    in_readme = [item.body for item in items_of("README.md") if INSTALL in item.body]
    in_page = block(PAGE, INSTALL)
    assert in_readme == [f"{INSTALL}\n"]
    assert in_page.startswith(f"{INSTALL} ")
    args = shlex.split(INSTALL)[2:]

    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )

    assert resolved.returncode == 0, resolved.stderr


def settings_of(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return namespace


def test_the_settings_pass_the_checks() -> None:
    settings = settings_of(block(PAGE, "# settings.py"))
    assert "alkstore.adapters.django" in settings["INSTALLED_APPS"]
    backend = AlkstoreBackend("default", settings["TASKS"]["default"])
    assert backend.check() == []
    assert backend.queues == {"default", "emails"}


PERIODIC_TASKS = """
from django.tasks import task


@task
def cleanup() -> None: ...


@task
def report(kind: str, top: int) -> None: ...
"""


def test_the_periodic_settings_pass_the_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block's two task paths, ``shop.tasks.cleanup`` and ``shop.tasks.report``, given tasks by the test."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "tasks.py").write_text(PERIODIC_TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        settings = settings_of(block(PAGE, '"shop.tasks.cleanup": "@every 1h"'))
        backend = AlkstoreBackend("default", settings["TASKS"]["default"])

        assert backend.check() == []
        periodic = backend.periodic()
        assert {path: (spec, args, kwargs) for path, (_, spec, args, kwargs) in periodic.items()} == {
            "shop.tasks.cleanup": ("@every 1h", [], {}),
            "shop.tasks.report": ("@every 1d", ["daily"], {"top": 10}),
        }
    finally:
        for name in ("shop.tasks", "shop"):
            sys.modules.pop(name, None)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django", "tests.django.project.shop"])
def test_place_order_commits_the_order_with_its_receipt_or_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's ``shop/tasks.py``, its ``Order`` the test project's, imported as ``docs_shop.tasks``."""
    source = block(PAGE, "def place_order(email: str) -> Order:")
    assert "from shop.models import Order" in source
    (tmp_path / "docs_shop").mkdir()
    (tmp_path / "docs_shop" / "__init__.py").write_text("")
    (tmp_path / "docs_shop" / "tasks.py").write_text(
        source.replace("from shop.models", "from tests.django.project.shop.models")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import docs_shop.tasks  # type: ignore[import-not-found]

        refused = []

        def place_then_fail() -> None:
            with transaction.atomic():
                refused.append(docs_shop.tasks.place_order("nobody@example.com"))
                raise RuntimeError("the caller's transaction rolls back")

        with pytest.raises(RuntimeError):
            place_then_fail()
        assert not Order.objects.filter(pk=refused[0].pk).exists()
        assert receipts_of(refused[0]) == []

        order = docs_shop.tasks.place_order("ada@example.com")
        (job,) = receipts_of(order)
        assert (job.task, job.priority) == ("docs_shop.tasks.send_receipt", 10)
    finally:
        for name in ("docs_shop.tasks", "docs_shop"):
            sys.modules.pop(name, None)


def test_the_urls_route_the_admin_pages() -> None:
    """With its imports, the block is the test project's URLconf, which the admin tests (test_admin.py) serve."""
    namespace: dict[str, Any] = {"path": path, "include": include, "admin": admin}
    exec(block(PAGE, "# urls.py"), namespace)

    def described(patterns: list[Any]) -> list[tuple[str, Any]]:
        """Each entry's route and what it includes: a URLconf module's name, or the admin site's namespace."""
        return [
            (str(entry.pattern), entry.urlconf_name if isinstance(entry.urlconf_name, str) else entry.namespace)
            for entry in patterns
        ]

    assert described(namespace["urlpatterns"]) == described(project_urls.urlpatterns)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django", "tests.django.project.shop"])
def test_the_commands_migrate_and_run_a_worker(tmp_path: Path) -> None:
    from tests.django.project.shop.tasks import write

    migrate, work = [
        shlex.split(line, comments=True) for line in block(PAGE, "# create or upgrade the schema").splitlines()
    ]
    assert migrate[:2] == work[:2] == ["python", "manage.py"]
    assert run([sys.executable, str(MANAGE), *migrate[2:]]).returncode == 0
    target = tmp_path / "written"
    write.enqueue(str(target), "by the documented worker")
    with LiveProcess([sys.executable, str(MANAGE), *work[2:]]) as worker:
        wait_until(target.exists, "the documented worker to run the task", PATIENCE * 2)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish() == 0, worker.stderr
    assert target.read_text() == "by the documented worker"
