"""The code blocks of the README and docs/*.md, found as a Markdown reader finds them, for tests that run them.

Two kinds: fenced (```` ```info ```` ... ```` ``` ````) and indented (four spaces or more after a
blank line, outside a list). ``block(doc, needle)`` is the one block of a page that holds
``needle``; tests read their block through it (or name the needle otherwise), and
``tests/test_docs_blocks.py`` holds every block of every page to a test or to a reason.
``run_script`` runs a block (or a test's edit of one) as a script in a subprocess.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The pages whose blocks are audited: the README and docs/*.md (the ADRs are records, not manuals).
PAGES = ("README.md", *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")))

_FENCE = re.compile(r"^(```+)([\w-]*)\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


@dataclass(frozen=True)
class Block:
    """One code block: its page, first line (1-based, the fence's or the first indented line's), kind and text."""

    page: str
    line: int
    kind: str  # "fenced" or "indented"
    info: str  # a fenced block's info string ("" if none, and for indented blocks)
    body: str  # the content, newline-terminated; an indented block's lines without their four spaces

    def where(self) -> str:
        first = self.body.splitlines()[0] if self.body.strip() else ""
        return f"{self.page}:{self.line} ({self.kind} {self.info or 'no info'}: {first[:60]!r})"


def _in_list(lines: list[str], index: int) -> bool:
    """Whether the indented line at ``index`` continues a list item (then it is no code block)."""
    for previous in reversed(lines[:index]):
        if not previous.strip() or previous.startswith("    "):
            continue
        return bool(_LIST_ITEM.match(previous)) or previous.startswith(" ")
    return False


def blocks_of(page: str, text: str | None = None) -> list[Block]:
    """Every code block of ``page`` (a path relative to the repository root), in order."""
    if text is None:
        text = (ROOT / page).read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if lines[j].startswith(fence.group(1)) and not lines[j].strip("`")
                ),
                None,
            )
            assert end is not None, f"{page}:{i + 1}: a fence that never closes"
            found.append(
                Block(page, i + 1, "fenced", fence.group(2), "".join(f"{line}\n" for line in lines[i + 1 : end]))
            )
            i = end + 1
            continue
        starts_block = lines[i].startswith("    ") and lines[i].strip() and (i == 0 or not lines[i - 1].strip())
        if starts_block and not _in_list(lines, i):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            found.append(Block(page, i + 1, "indented", "", "".join(f"{line[4:]}\n" for line in lines[i:end])))
            i = end
            continue
        i += 1
    return found


#: An inline code span of the prose holding a ``pip install`` line: an install line to claim, like a block.
_INLINE_INSTALL = re.compile(r"`([^`\n]*pip install[^`\n]*)`")


def items_of(page: str, text: str | None = None) -> list[Block]:
    """The blocks of ``page`` and its inline install lines (as blocks of kind ``inline``)."""
    if text is None:
        text = (ROOT / page).read_text(encoding="utf-8")
    found = blocks_of(page, text)
    spans = {(b.line, b.line + b.body.count("\n") + (1 if b.kind == "fenced" else -1)) for b in found}
    for match in _INLINE_INSTALL.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if not any(start <= line <= end for start, end in spans):
            found.append(Block(page, line, "inline", "", match.group(1) + "\n"))
    return found


def all_blocks() -> list[Block]:
    """Every code block of every audited page."""
    return [block for page in PAGES for block in blocks_of(page)]


def block(page: str, needle: str) -> str:
    """The text of the one block of ``page`` holding ``needle`` (a failure if none or several do)."""
    holders = [b for b in blocks_of(page) if needle in b.body]
    assert len(holders) == 1, f"{len(holders)} blocks of {page} hold {needle!r}: {[b.where() for b in holders]}"
    return holders[0].body


def run_script(
    text: str, directory: Path, name: str = "example.py", *, warnings_as_errors: bool = True
) -> subprocess.CompletedProcess[str]:
    """Write ``text`` to ``directory/name`` and run it there with this interpreter; it must exit 0.

    A warning is an error by default, so a deprecation in an example fails its test; the result is returned
    for the test's own checks of its output.
    """
    script = directory / name
    script.write_text(text, encoding="utf-8")
    flags = ["-W", "error"] if warnings_as_errors else []
    result = subprocess.run(
        [sys.executable, *flags, str(script)],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result
