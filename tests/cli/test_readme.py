"""The README cannot rot: its set-up commands come first, it stays a short tour, and its examples run (with
docs/tour.md's, the Python API's tour that moved out of it)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import alkstore
from tests._docs import block, run_script
from tests._proc import ALKSTORE, LiveProcess
from tests.support import must_claim

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOUR = "docs/tour.md"
#: The README is a short tour; the reference lives under docs/ (its "Where to read on" points there).
README_MAX_BYTES = 12_288
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/alkstore demo"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install '.[test,dev]' && .venv/bin/pytest"


def code_blocks() -> list[tuple[str, str]]:
    """Every fenced block of the README as (info string, content)."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(README.read_text(encoding="utf-8"))]


def python_blocks() -> list[str]:
    return [body for info, body in code_blocks() if info == "python"]


def block_with(*needles: str) -> str:
    """The one Python block of the README that contains every one of ``needles``."""
    (found,) = [body for body in python_blocks() if all(needle in body for needle in needles)]
    return found


def test_the_first_two_code_blocks_are_the_demo_and_the_test_commands() -> None:
    blocks = code_blocks()

    assert blocks[0] == ("sh", DEMO_COMMAND + "\n")
    assert blocks[1] == ("sh", TEST_COMMAND + "\n")


def test_the_setup_commands_stand_at_the_top_after_a_few_lines_of_introduction() -> None:
    text = README.read_text(encoding="utf-8")
    before = text[: text.index("```")]

    assert before.startswith("# alkstore\n")
    assert "##" not in before  # no section comes before the two commands
    assert len(before.splitlines()) <= 10


def test_the_readme_stays_a_short_tour() -> None:
    size = len(README.read_bytes())

    assert size <= README_MAX_BYTES, f"README.md is {size} bytes: move the reference to docs/ and link it"


def test_the_test_command_installs_the_package_non_editable() -> None:
    assert "-e" not in TEST_COMMAND.split()
    assert "--editable" not in TEST_COMMAND


def test_ci_runs_the_readmes_two_commands_as_written_in_a_fresh_clone() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")

    assert "git clone" in script
    assert block("README.md", ".venv/bin/alkstore demo") == DEMO_COMMAND + "\n"
    assert block("README.md", "install '.[test,dev]' && .venv/bin/pytest") == TEST_COMMAND + "\n"
    assert f'readme_command 1 "{DEMO_COMMAND}"' in script
    assert f'readme_command 2 "{TEST_COMMAND}"' in script


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    result = run_script(block(TOUR, 'alkstore.open("memory://"'), tmp_path, "tour.py", warnings_as_errors=False)

    assert result.stderr == ""


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_every_python_example_compiles(index: int) -> None:
    compile(python_blocks()[index], f"README.md python block {index + 1}", "exec")


@pytest.mark.postgres
def test_the_postgres_example_runs_against_a_fresh_schema(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    example = block(TOUR, "outbox_enqueue_tx(conn")
    documented_url, documented_schema = '"postgresql://postgres@127.0.0.1:5432/test"', 'schema="alkstore"'
    assert documented_url in example
    assert documented_schema in example
    edited = example.replace(documented_url, repr(pg_dsn)).replace(documented_schema, f"schema={pg_schema!r}")

    run_script(edited, tmp_path, "postgres_example.py", warnings_as_errors=False)

    with alkstore.open(pg_dsn, schema=pg_schema, max_size=2) as store:
        delivered: list[object] = []
        assert store.outbox("webhooks").run_once("check", lambda payload, job: delivered.append(payload))
        assert delivered == [{"event": "order.paid", "order": 42}]
        email = must_claim(store.queue("emails"), "check")
        assert email.payload == {"to": "ada@example.com"}
        email.ack()


@pytest.mark.postgres
@pytest.mark.slow
def test_the_first_example_is_a_task_run_by_alkstore_worker(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    readme_url = "postgresql://postgres@127.0.0.1:5432/test"
    jobs = block("README.md", "# myapp/jobs.py")
    assert jobs.startswith("# myapp/jobs.py\n")
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "jobs.py").write_text(jobs)
    enqueue = block("README.md", "send_email.enqueue(store").replace(
        f'"{readme_url}"', f"{pg_dsn!r}, schema={pg_schema!r}"
    )
    result = subprocess.run(
        [sys.executable, "-c", enqueue], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    command = block("README.md", "alkstore worker --app myapp.jobs:tasks")
    args = command.split()[1:]
    args[args.index("--url") + 1] = pg_dsn
    with LiveProcess([ALKSTORE, *args, "--schema", pg_schema], cwd=tmp_path) as worker:
        # The two jobs run on two threads at once, so their prints may share a line: look at all of stdout.
        texts = ("sending 'hi' to ada@example.com", "sending 'welcome' to bob@example.com")
        worker.wait_for(lambda _stream, _line: all(text in "".join(worker.stdout) for text in texts), timeout=60)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=60) == 0
    with alkstore.open(pg_dsn, schema=pg_schema, max_size=2) as store:
        assert [s.name for s in store.schedules()] == ["myapp.jobs:vacuum"]
        assert store.queue("emails").claim("check") is None
