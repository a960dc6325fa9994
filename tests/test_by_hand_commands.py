"""The commands the docs give for runs by hand (mutation testing, the long nemesis run, the dashboard's
screenshots) name what their scripts take. Each takes minutes to hours, so none is run here: each line
is parsed by its script (``--help`` last, so nothing starts) or checked against it, as each test says."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests._docs import ROOT, block

PYTHON = sys.executable
#: The console scripts of the environment running the tests (the docs' ``.venv/bin/…``).
BIN = Path(sys.executable).parent


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)


def options_of(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][\w-]*", help_text))


def commands(text: str) -> list[list[str]]:
    """The block's lines as argument lists, comments dropped, ``a && b`` split in two."""
    found: list[list[str]] = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        while "&&" in words:
            cut = words.index("&&")
            found.append(words[:cut])
            words = words[cut + 1 :]
        if words:
            found.append(words)
    return found


def test_the_screenshot_command_starts() -> None:
    (command,) = commands(block("docs/dashboard.md", "bench/dashboard_screenshots.py"))
    assert command == [".venv/bin/python", "bench/dashboard_screenshots.py"]

    result = run([PYTHON, command[1], "--help"])

    assert result.returncode == 0, result.stderr
    assert "--out" in result.stdout


def test_the_mutation_commands_name_what_the_scripts_take() -> None:
    lines = commands(block("docs/mutation.md", ".ci/mutation core 'alkstore.scheduler._tick.*'"))
    script = (ROOT / ".ci" / "mutation").read_text(encoding="utf-8")
    targets = re.search(r"^case \$target in\n(.*?)^esac", script, re.MULTILINE | re.DOTALL)
    assert targets is not None
    known = set(re.findall(r"^([\w |]+)\)", targets.group(1), re.MULTILINE)[0].replace(" ", "").split("|"))
    known |= set(re.findall(r"^(\w+)\)$", targets.group(1), re.MULTILINE))
    assert known == {"core", "postgres", "sql"}
    sql_options = options_of(run([PYTHON, ".ci/sql_mutants.py", "--help"]).stdout)
    mutmut_show = run([str(BIN / "mutmut"), "show", "--help"])
    assert mutmut_show.returncode == 0, mutmut_show.stderr

    checked = 0
    for words in lines:
        if words[0] == ".ci/mutation":
            target = words[1] if len(words) > 1 else "core"
            assert target in known, words
            if target == "sql":
                assert {word for word in words[2:] if word.startswith("--")} <= sql_options, (words, sql_options)
            checked += 1
        elif words[0] == "cd":
            assert words[1] == ".mutation/core"
        else:
            assert words[:2] == ["../../.venv/bin/mutmut", "show"], words
    assert checked == 5


def test_the_nemesis_commands_parse() -> None:
    (short,) = commands(block("docs/reliability.md", "-p no:cacheprovider tests/nemesis/test_nemesis.py"))
    assert short[0] == ".venv/bin/pytest"
    collected = run([PYTHON, "-m", "pytest", *short[1:], "--collect-only"])
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "test_nemesis.py::test_a_short_nemesis_run" in collected.stdout

    check, worktree, cd, venv, install, long = commands(
        block("docs/reliability.md", "python -m tests.nemesis.run --operations 1000000")
    )
    assert check == ["python3", "tools/async_to_sync.py", "--check"]
    checked = run([PYTHON, *check[1:]])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Not run: a worktree and its environment (the install line is resolved by tests/test_install_lines.py).
    assert worktree[:3] == ["git", "worktree", "add"]
    assert cd == ["cd", worktree[-2]]
    assert venv == ["python3", "-m", "venv", ".venv"]
    assert install[:2] == [".venv/bin/pip", "install"]
    assert long[:3] == [".venv/bin/python", "-m", "tests.nemesis.run"]
    helped = run([PYTHON, *long[1:], "--help"])  # parses the line's values up to --help, then stops
    assert helped.returncode == 0, helped.stderr
    assert {word for word in long if word.startswith("--")} <= options_of(helped.stdout)
