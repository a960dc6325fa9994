#!/usr/bin/env python3
"""Generate alkstore's sync runtime from its async source (ADR 026): one hand-written implementation.

Every module named ``*_async.py`` under ``core/alkstore`` and ``adapters/alkstore/adapters`` is the
one source of a behaviour; its sync twin (the same name without ``_async``) is made from it here:

* ``async def`` / ``async with`` / ``async for`` lose ``async``; ``await x`` becomes ``x``;
* ``Awaitable[X]`` in an annotation becomes ``X``;
* names map to their sync counterparts: ``AsyncStore`` → ``Store`` (any ``Async`` + capital, after leading underscores),
  ``open_async`` → ``open`` (any ``_async`` suffix, module names too), and the few in ``RENAMES``
  (``asleep`` → ``sleep``, ``__aenter__`` → ``__enter__``, …); docstrings and comments follow for
  the names the async sources themselves define;
* ``if ASYNC:`` keeps its ``else:`` side only (``if not ASYNC:`` its own body), and ``a if ASYNC
  else b`` becomes ``b``, for the few places where the two runtimes must differ (``ASYNC`` is
  ``alkstore.port._acompat.ASYNC``: always true where the source runs, so the source type-checks both
  sides).

The twins are committed (ADR 059), each under a header naming its source, so that every class is a
file a reader, an editor and a code host can open; run this script after editing a source, and
``--check`` (run by ``.ci/run`` and at the test session's start) fails when a twin in the tree is
missing or stale. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["HEADER_PREFIX", "RENAMES", "SOURCE_ROOTS", "generate", "pairs", "stale", "sync_name", "write"]

ROOT = Path(__file__).resolve().parent.parent
#: Where async sources live, relative to the repository root.
SOURCE_ROOTS = ("core/alkstore", "adapters/alkstore/adapters")
#: Names whose sync counterpart is not found by the two general rules.
RENAMES = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "aclose": "close",
    "aclosing": "closing",
    "acall": "call",
    "agather": "gather",
    "aiter": "iter",
    "anext": "next",
    "asleep": "sleep",
    "aspawn": "spawn",
    "asynccontextmanager": "contextmanager",
    "AbstractAsyncContextManager": "AbstractContextManager",
    "AEvent": "Event",
    "ALock": "Lock",
    "ACondition": "Condition",
    "AQueue": "Queue",
    "AThreads": "Threads",
    "AHelper": "Helper",
}
#: Names that keep their ``Async`` (none yet: a library class with no sync twin would go here).
KEEP: frozenset[str] = frozenset()
_ASYNC_CLASS = re.compile(r"(_*)Async([A-Z]\w*)")
_ASYNC_SUFFIX = re.compile(r"(\w+?)_async")
#: The first lines of every twin; tools that look for repeated code skip files by this header.
_HEADER = (
    "# GENERATED FILE, DO NOT EDIT: made from {source}\n"
    "# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run\n"
    "# `python3 tools/async_to_sync.py`; CI fails when this file is stale.\n"
)
#: What the header starts with, for the checks that recognise a twin.
HEADER_PREFIX = "# GENERATED FILE, DO NOT EDIT: made from "

#: The tokens whose text is renamed word by word: strings, comments, and (Python 3.12+) the text
#: parts of f-strings, which earlier versions tokenize as one STRING.
_TEXT_TOKENS = frozenset(
    {tokenize.STRING, tokenize.COMMENT} | ({tokenize.FSTRING_MIDDLE} if hasattr(tokenize, "FSTRING_MIDDLE") else set())
)


def sync_name(name: str) -> str:
    """The sync counterpart of a name of the async source (itself when it has none)."""
    if name in RENAMES:
        return RENAMES[name]
    if name in KEEP:
        return name
    match = _ASYNC_CLASS.fullmatch(name)
    if match is not None:
        return match.group(1) + match.group(2)
    match = _ASYNC_SUFFIX.fullmatch(name)
    if match is not None:
        return match.group(1)
    return name


def pairs(root: Path = ROOT) -> list[tuple[Path, Path]]:
    """Every async source under ``root`` with the path of its sync twin, in path order."""
    found = []
    for base in SOURCE_ROOTS:
        for source in sorted((root / base).rglob("*_async.py")):
            found.append((source, source.with_name(source.name.removesuffix("_async.py") + ".py")))
    return found


def defined_names(sources: Iterable[Path]) -> set[str]:
    """The names the async sources define (modules, classes, functions, assigned names) whose sync name differs."""
    names: set[str] = set()
    for source in sources:
        names.add(source.stem)
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):  # a type alias, named in ``__all__``
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(target.id for target in targets if isinstance(target, ast.Name))
    return {name for name in names if sync_name(name) != name}


# -- if ASYNC: blocks -------------------------------------------------------------------------


def _flag(node: ast.stmt) -> bool | None:
    """``True`` for ``if ASYNC:``, ``False`` for ``if not ASYNC:``, ``None`` for any other statement."""
    if not isinstance(node, ast.If):
        return None
    return _flag_test(node.test)


def _flag_test(test: ast.expr) -> bool | None:
    """``True`` for the test ``ASYNC``, ``False`` for ``not ASYNC``, ``None`` for any other."""
    if isinstance(test, ast.Name) and test.id == "ASYNC":
        return True
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and isinstance(test.operand, ast.Name)
        and test.operand.id == "ASYNC"
    ):
        return False
    return None


def _outermost_flags(tree: ast.AST) -> Iterator[ast.If]:
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and _flag(child) is not None:
                assert isinstance(child, ast.If)
                yield child
            else:
                stack.append(child)


def _keep_sync_side(text: str, where: str) -> str:
    """``text`` with every ``if ASYNC:`` block replaced by its sync side, dedented to the ``if``."""
    while True:
        lines = text.splitlines(keepends=True)
        blocks = sorted(_outermost_flags(ast.parse(text)), key=lambda node: node.lineno, reverse=True)
        if not blocks:
            return text
        for node in blocks:
            if node.orelse and lines[node.orelse[0].lineno - 1].lstrip().startswith("elif"):
                raise SyntaxError(f"{where}:{node.lineno}: 'if ASYNC: … elif …' is not supported: use else")
            is_async = _flag(node)
            kept = node.orelse if is_async else node.body
            start, end = node.lineno - 1, node.end_lineno or node.lineno
            indent = len(lines[start]) - len(lines[start].lstrip())
            replacement: list[str] = []
            if kept:
                if is_async:
                    first = next(
                        i for i in range(node.body[-1].end_lineno or 0, end) if lines[i].strip().startswith("else")
                    )
                    kept_lines = lines[first + 1 : kept[-1].end_lineno]
                else:
                    kept_lines = lines[start + 1 : kept[-1].end_lineno]
                inner = min(len(line) - len(line.lstrip()) for line in kept_lines if line.strip())
                replacement = [line[inner - indent :] if line.strip() else line for line in kept_lines]
            lines[start:end] = replacement
        text = "".join(lines)


# -- tokens -----------------------------------------------------------------------------------


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _rename_words(text: str, names: set[str]) -> str:
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda match: sync_name(match.group(1)), text)


def _matching_brackets(tokens: list[tokenize.TokenInfo]) -> dict[int, tuple[tokenize.TokenInfo, tokenize.TokenInfo]]:
    """For each ``Awaitable`` directly followed by ``[``: that bracket and its matching ``]``, by the name's id."""
    found: dict[int, tuple[tokenize.TokenInfo, tokenize.TokenInfo]] = {}
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if tok.string != "Awaitable" or nxt.string != "[" or nxt.start != tok.end:
            continue
        depth = 0
        for later in tokens[i + 1 :]:
            if later.string in "([{" and later.type == tokenize.OP:
                depth += 1
            elif later.string in ")]}" and later.type == tokenize.OP:
                depth -= 1
                if depth == 0:
                    found[id(tok)] = (nxt, later)
                    break
    return found


def _transform_tokens(text: str, names: set[str], where: str) -> str:
    starts = _offsets(text)
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    significant = [tok for tok in tokens if tok.type not in (tokenize.NL, tokenize.COMMENT)]
    following = {id(tok): significant[i + 1] for i, tok in enumerate(significant[:-1])}
    edits: list[tuple[int, int, str]] = []

    def at(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1]

    closing = _matching_brackets(tokens)
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string == "Awaitable" and id(tok) in closing:
            # ``Awaitable[X]`` is ``X`` in the sync runtime: drop the wrapper and its bracket.
            opener, closer = closing[id(tok)]
            edits.append((at(tok.start), at(opener.end), ""))
            edits.append((at(closer.start), at(closer.end), ""))
        elif tok.type == tokenize.NAME:
            nxt = following.get(id(tok))
            if (tok.string == "async" and nxt is not None and nxt.string in ("def", "with", "for")) or (
                tok.string == "await" and nxt is not None
            ):
                edits.append((at(tok.start), at(nxt.start), ""))
            elif tok.string == "ASYNC":
                raise SyntaxError(f"{where}:{tok.start[0]}: ASYNC used outside 'if ASYNC:' / 'if not ASYNC:'")
            else:
                renamed = sync_name(tok.string)
                if renamed != tok.string:
                    edits.append((at(tok.start), at(tok.end), renamed))
        elif tok.type in _TEXT_TOKENS:
            # The source's own characters, not tok.string: Python 3.12 gives an f-string's text
            # as FSTRING_MIDDLE tokens whose string has "{{" unescaped.
            source = text[at(tok.start) : at(tok.end)]
            renamed = _rename_words(source, names)
            if renamed != source:
                edits.append((at(tok.start), at(tok.end), renamed))
    out = text
    for start, end, replacement in sorted(edits, reverse=True):
        out = out[:start] + replacement + out[end:]
    return out


def _keep_sync_values(text: str, where: str) -> str:
    """``text`` with every ``a if ASYNC else b`` replaced by ``b`` (and ``a if not ASYNC else b`` by ``a``)."""
    tree = ast.parse(text)
    found = [node for node in ast.walk(tree) if isinstance(node, ast.IfExp) and _flag_test(node.test) is not None]
    if not found:
        return text
    starts = _offsets(text)
    edits = []
    for node in found:
        kept = node.orelse if _flag_test(node.test) else node.body
        segment = ast.get_source_segment(text, kept)
        if segment is None:
            raise SyntaxError(f"{where}:{node.lineno}: cannot read the sync side of an ASYNC expression")
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
        atom = isinstance(kept, ast.Constant | ast.Name | ast.Attribute | ast.Call | ast.Subscript)
        edits.append((start, end, segment if atom else f"({segment})"))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return _keep_sync_values(text, where)


def _drop_flag_imports(text: str) -> str:
    """``text`` without ``ASYNC`` in its ``from … import`` statements (a statement left empty goes)."""
    lines = text.splitlines(keepends=True)
    found = [
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ImportFrom) and any(alias.name == "ASYNC" for alias in node.names)
    ]
    for node in sorted(found, key=lambda node: node.lineno, reverse=True):
        kept = [alias for alias in node.names if alias.name != "ASYNC"]
        indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
        replacement = []
        if kept:
            listed = ", ".join(
                alias.name if alias.asname is None else f"{alias.name} as {alias.asname}" for alias in kept
            )
            replacement = [f"{indent}from {'.' * node.level}{node.module or ''} import {listed}\n"]
        lines[node.lineno - 1 : node.end_lineno] = replacement
    return "".join(lines)


def generate(source_text: str, source_label: str, names: set[str] | None = None) -> str:
    """The sync twin of one async source's text (``source_label`` names it in the header and errors)."""
    names = set() if names is None else names
    text = _keep_sync_side(source_text, source_label)
    text = _keep_sync_values(text, source_label)
    text = _drop_flag_imports(text)
    text = _transform_tokens(text, names, source_label)
    out = _HEADER.format(source=source_label) + text
    compile(out, source_label.removesuffix("_async.py") + ".py", "exec")
    return out


def render(root: Path = ROOT) -> dict[Path, str]:
    """Every sync twin under ``root``, by path, as it should read."""
    found = pairs(root)
    names = defined_names(source for source, _ in found)
    return {
        target: generate(source.read_text(encoding="utf-8"), source.relative_to(root).as_posix(), names)
        for source, target in found
    }


def write(root: Path = ROOT, out: Path | None = None) -> list[Path]:
    """Write every twin (into ``out``, mirroring ``root``'s layout, if given); the paths that changed."""
    changed = []
    for target, text in render(root).items():
        path = target if out is None else out / target.relative_to(root)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(path)
    return changed


def stale(root: Path = ROOT) -> list[Path]:
    """The twins in the tree that are missing or differ from what their sources make."""
    return [
        target
        for target, text in render(root).items()
        if not target.exists() or target.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a twin in the tree is missing or stale")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale()
        for path in behind:
            print(f"stale: {path.relative_to(ROOT)} (run python3 tools/async_to_sync.py)", file=sys.stderr)
        return 1 if behind else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
