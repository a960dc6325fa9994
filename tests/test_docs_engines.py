"""docs/engines.md as written: its list of each port's methods, its excerpts of the memory engine, its
entry points, its store on an engine, and its commands that run the contract suite port by port."""

from __future__ import annotations

import subprocess
import sys

from alkstore.engine import AsyncOperationsPort, AsyncRuntimePort
from tests._docs import ROOT, block

PAGE = "docs/engines.md"
MEMORY_ENGINE = ROOT / "adapters" / "alkstore" / "adapters" / "memory" / "_engine_async.py"
EXCERPTS = (
    "async def open_engine(url: str",
    "def default_clock(self) -> Clock:",
    "async def claim(self, request: port.ClaimRequest)",
    "async def ack(self, held: Sequence[port.Held])",
)


def test_the_listing_gives_each_port_exactly_its_abstract_methods() -> None:
    listed = {}
    for port in (AsyncRuntimePort, AsyncOperationsPort):
        text = block(PAGE, "runtime port (AsyncRuntimePort)")
        section = text.split(f"({port.__name__})", 1)[1].split("\n\n", 1)[0]
        # each line: a group title in the first 20 columns, then the methods
        listed[port.__name__] = {name for line in section.splitlines()[1:] for name in line[20:].split()}
    assert listed == {port.__name__: set(port.__abstractmethods__) for port in (AsyncRuntimePort, AsyncOperationsPort)}


def test_the_memory_engine_excerpts_are_its_code() -> None:
    source = MEMORY_ENGINE.read_text(encoding="utf-8")
    for needle in EXCERPTS:
        assert block(PAGE, needle) in source, f"the excerpt with {needle!r} is no longer the memory engine's code"


def test_the_entry_points_are_the_memory_engines_own() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for chunk in block(PAGE, '[project.entry-points."alkstore.engines"]').strip().split("\n\n"):
        section, entry = chunk.splitlines()
        assert f"{section}\n" in pyproject
        assert pyproject.split(f"{section}\n", 1)[1].split("\n\n", 1)[0].splitlines().count(entry) == 1, entry


def test_a_store_on_an_engine_runs_as_written() -> None:
    exec(compile(block(PAGE, "engine = MemoryEngine()"), PAGE, "exec"), {})


def test_the_commands_select_each_ports_contract_tests() -> None:
    collected = {}
    for line in block(PAGE, "-m runtime_port").splitlines():
        args = line.split()[1:]  # .venv/bin/pytest is this interpreter's pytest
        assert args[:4] == ["contract_tests", "-k", "memory", "-m"], line
        result = subprocess.run(
            [sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:randomly"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        collected[args[-1]] = {entry.split("::")[0] for entry in result.stdout.splitlines() if "::" in entry}
    assert "contract_tests/test_results.py" in collected["operations_port"]
    assert "contract_tests/test_queues.py" in collected["runtime_port"]
    assert not collected["operations_port"] & collected["runtime_port"]
