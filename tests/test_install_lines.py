"""Every ``pip install`` line of the README and docs/*.md names extras that exist, and resolves from the checkout.

The lines are resolved by the environment's own pip with ``--dry-run`` from the repository root, in two
calls (the editable lines, then the others), each with every line's requirements as written: a union
that resolves means each line does, and one call costs what one line does (pip's start and the
checkout's metadata, a few seconds, where eight calls took half a minute on a loaded machine). The
checkout's metadata is built with ``--no-build-isolation`` (the installed hatchling, not one fetched
per call). The Django line needs Python 3.12 or later and is resolved by
tests/django/test_docs_django.py, where the suite runs on one.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, distribution, version

from packaging.requirements import Requirement

from tests._docs import PAGES, ROOT, items_of

#: The pages' install lines the audit (tests/test_docs_blocks.py) gives to this test, by page and needle.
INSTALL_LINES = (
    ("README.md", "PY312 -m venv .venv312"),
    ("README.md", "pip install starlette uvicorn 'sqlalchemy[asyncio]'"),
    ("docs/dashboard.md", "pip install '.[web]'"),
    ("docs/development.md", "pip install -e '.[test,dev]'"),
    ("docs/operations.md", "pip install '.[web]'"),
    ("docs/telemetry.md", "pip install '.[otel]'"),
    ("docs/telemetry.md", "pip install opentelemetry-exporter-prometheus"),
)
#: Lines for another interpreter: resolved where the suite runs on Python 3.12 or later.
ELSEWHERE = {("'.[django]'",): "tests/django/test_docs_django.py"}

_PIP_INSTALL = re.compile(r"pip install ([^&#`\n]*)")


def install_lines() -> dict[tuple[str, ...], list[str]]:
    """Every ``pip install`` of every block and prose line of the pages: its arguments (as written) -> where."""
    found: dict[tuple[str, ...], list[str]] = {}
    for page in PAGES:
        for item in items_of(page):
            for match in _PIP_INSTALL.finditer(item.body):
                found.setdefault(tuple(match.group(1).split()), []).append(f"{page}:{item.line}")
    return found


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["optional-dependencies"])


def named_extras(args: tuple[str, ...]) -> list[str]:
    """The extras of the checkout an install line names (``'.[a,b]'`` -> a, b)."""
    named: list[str] = []
    for word in shlex.split(" ".join(args)):
        match = re.fullmatch(r"\.\[([\w,-]+)\]", word)
        if match:
            named.extend(match.group(1).split(","))
    return named


def requirements(args: tuple[str, ...]) -> list[str]:
    """A line's requirements as pip reads them (quotes removed), without its options (``-q``, ``-e``)."""
    return [word for word in shlex.split(" ".join(args)) if not word.startswith("-")]


def dry_run(requirements: list[str], *, editable: bool) -> subprocess.CompletedProcess[str]:
    words = [part for requirement in requirements for part in (["-e", requirement] if editable else [requirement])]
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", *words]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


def test_every_install_line_resolves_from_the_checkout() -> None:
    lines = install_lines()
    for page, needle in INSTALL_LINES:
        args = tuple(needle.partition("pip install ")[2].split()) or ("'.[test,dev]'",)
        assert any(where.startswith(f"{page}:") for where in lines.get(args, [])), (page, needle, lines)
    known = extras()
    for args, where in lines.items():
        assert set(named_extras(args)) <= set(known), f"{where}: pip install {' '.join(args)} names a missing extra"
    here = [args for args in lines if args not in ELSEWHERE]
    assert len(here) >= 7, here
    editable = [requirement for args in here if "-e" in args for requirement in requirements(args)]
    plain = [requirement for args in here if "-e" not in args for requirement in requirements(args)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(
            pool.map(lambda group: dry_run(group[0], editable=group[1]), [(editable, True), (plain, False)])
        )

    for result in outcomes:
        assert result.returncode == 0, f"{result.args}:\n{result.stderr[-3000:]}"


def test_the_installed_environment_has_every_extra_the_suite_uses() -> None:
    """The test and dev extras (and the dashboard's and telemetry's they overlap) are what the suite runs with."""
    for extra in ("test", "dev", "web", "otel"):
        for text in extras()[extra]:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            try:
                distribution(requirement.name)
            except PackageNotFoundError:
                raise AssertionError(f"{requirement.name} of the {extra} extra is not installed") from None
            assert requirement.specifier.contains(version(requirement.name), prereleases=True), text
