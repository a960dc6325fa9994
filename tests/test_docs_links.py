"""Every relative link of the README and docs/*.md leads somewhere: to a file of the checkout and, with a
``#fragment``, to a heading of that page (as GitHub names its anchors). Pages move; their links must follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._docs import PAGES, ROOT, blocks_of

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = page.read_text(encoding="utf-8")
    for block in blocks_of(page.relative_to(ROOT).as_posix(), text):
        text = text.replace(block.body, "")  # a `# comment` in a code block is no heading
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in _HEADING.findall(text)}


def links(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in blocks_of(page, text):
        text = text.replace(block.body, "")
    return [target for target in _LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_leads_to_a_file_and_heading(page: str) -> None:
    broken: list[str] = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        resolved = (ROOT / page).parent / path if path else ROOT / page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page}: {broken}"


def test_a_moved_section_breaks_its_links() -> None:
    assert "tasks-and-a-worker" in anchors(ROOT / "README.md")
    assert "deploying" not in anchors(ROOT / "README.md")
