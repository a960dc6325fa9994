"""The README's Django section runs as written: its settings pass the checks, its ``place_order`` commits the
order with its job (or neither), and its two commands migrate and then run the task in a worker."""

from __future__ import annotations

import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.tasks import task_backends

from alkstore.adapters.django.backend import AlkstoreBackend
from tests._proc import LiveProcess, run
from tests.django.project.shop.models import Order
from tests.support import PATIENCE

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django", "tests.django.project.shop"]),
]

ROOT = Path(__file__).resolve().parents[2]
MANAGE = Path(__file__).with_name("manage.py")
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def django_section() -> list[tuple[str, str]]:
    """The fenced blocks of the README's ``## Django`` section, as (info string, content)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Django\n") :]
    section = section[: section.index("\n## ", 1)]
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(section)]


def block(first_line: str) -> str:
    (found,) = [body for _, body in django_section() if body.startswith(first_line)]
    return found


def test_the_settings_configure_a_backend_that_passes_its_checks() -> None:
    settings: dict[str, Any] = {}
    exec(block("# settings.py\n"), settings)
    assert "alkstore.adapters.django" in settings["INSTALLED_APPS"]
    backend = AlkstoreBackend("default", settings["TASKS"]["default"])
    assert backend.check() == []
    assert "emails" in backend.queues


@pytest.fixture
def readme_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The README's ``shop/tasks.py`` as the module ``readme_shop.tasks``, its ``Order`` the test project's."""
    package = tmp_path / "readme_shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    source = block("# shop/tasks.py\n")
    assert "from shop.models import Order" in source
    (package / "tasks.py").write_text(source.replace("from shop.models", "from tests.django.project.shop.models"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import readme_shop.tasks  # type: ignore[import-not-found]

    yield readme_shop.tasks
    sys.modules.pop("readme_shop.tasks", None)
    sys.modules.pop("readme_shop", None)


def receipts_of(order: Any) -> list[Any]:
    """The stored receipt jobs of ``order``."""
    page = task_backends["default"].store.jobs("emails", limit=500)
    return [job for job in page.jobs if job.payload == {"args": [order.pk], "kwargs": {}}]


def test_place_order_commits_the_order_with_its_job_and_the_worker_command_runs_it(
    readme_tasks: Any, tmp_path: Path
) -> None:
    refused = []

    def place_then_fail() -> None:
        with transaction.atomic():
            refused.append(readme_tasks.place_order("nobody@example.com"))
            raise RuntimeError("the caller's transaction rolls back")

    with pytest.raises(RuntimeError):
        place_then_fail()
    assert not Order.objects.filter(pk=refused[0].pk).exists()
    assert receipts_of(refused[0]) == []

    order = readme_tasks.place_order("ada@example.com")
    (job,) = receipts_of(order)
    assert (job.task, job.priority) == ("readme_shop.tasks.send_receipt", 10)

    migrate, work = [shlex.split(line) for line in block("python manage.py alkstore_migrate\n").splitlines()]
    assert run([sys.executable, str(MANAGE), *migrate[2:]]).returncode == 0
    env = {"PYTHONPATH": str(tmp_path)}
    with LiveProcess([sys.executable, str(MANAGE), *work[2:]], env=env) as worker:
        worker.wait_for(lambda name, line: f"receipt for order {order.pk} to ada@example.com" in line, PATIENCE)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish() == 0
