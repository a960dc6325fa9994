"""The command line on a ``sqlite:///`` URL: status, healthcheck and migrate read and check the file."""

from __future__ import annotations

from pathlib import Path

import alkstore
from tests._proc import ALKSTORE, run


def test_status_healthcheck_and_migrate_work_on_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with alkstore.open(url) as store:
        store.queue("mail").enqueue({"to": "a@example.org"})
        store.queue("mail").enqueue({"to": "b@example.org"})
    status = run([ALKSTORE, "status", "--url", url])
    assert status.returncode == 0, status.stderr
    (line,) = [line for line in status.stdout.splitlines() if line.startswith("mail ")]
    assert line.split()[1:6] == ["2", "0", "0", "0", "0"]
    health = run([ALKSTORE, "healthcheck", "--url", url])
    assert health.returncode == 0, health.stdout + health.stderr
    assert "healthy" in health.stdout
    migrate = run([ALKSTORE, "migrate", "--url", url])
    assert migrate.returncode == 0, migrate.stderr


def test_the_command_line_refuses_a_sqlite_file_in_a_missing_directory(tmp_path: Path) -> None:
    status = run([ALKSTORE, "status", "--url", f"sqlite:///{tmp_path / 'nowhere' / 'jobs.db'}"])
    assert status.returncode != 0
    assert "does not exist" in status.stderr
    assert not (tmp_path / "nowhere").exists()
