"""The error hierarchy, and the tree drawn in the errors module's docstring, which must match it."""

from __future__ import annotations

import inspect
import re

import pytest

import alkstore
from alkstore import errors

ERROR_CLASSES = [obj for _, obj in inspect.getmembers(errors, inspect.isclass) if obj.__module__ == errors.__name__]
INPUT_ERRORS = {"InvalidName", "ReservedName", "InvalidSpec", "InvalidPayload", "InvalidOptions", "InvalidTransaction"}
INPUT_ERRORS |= {"UnknownParent", "DependencyCycle"}


def drawn_tree() -> dict[str, tuple[str | None, bool]]:
    """Parse the docstring's tree: class name -> (drawn parent, drawn as a ValueError).

    A class's drawn parent is the nearest line above it whose name starts further left.
    """
    block = (errors.__doc__ or "").split("::", 1)[1].split("\n\n")[1]
    tree: dict[str, tuple[str | None, bool]] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.search(r"[A-Z]\w+", line)
        assert match, f"a line of the drawn tree names no class: {line!r}"
        while stack and stack[-1][0] >= match.start():
            stack.pop()
        tree[match.group()] = (stack[-1][1] if stack else None, "(ValueError)" in line)
        stack.append((match.start(), match.group()))
    return tree


def test_every_error_class_is_exported_from_errors_and_from_alkstore() -> None:
    names = {cls.__name__ for cls in ERROR_CLASSES}
    assert names == set(errors.__all__)
    for name in names:
        assert getattr(alkstore, name) is getattr(errors, name)
        assert name in alkstore.__all__


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_is_an_alkstore_error(cls: type[Exception]) -> None:
    assert issubclass(cls, errors.AlkstoreError)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_input_errors_and_only_they_are_value_errors(cls: type[Exception]) -> None:
    assert issubclass(cls, ValueError) == (cls.__name__ in INPUT_ERRORS)


def test_schema_out_of_date_is_a_database_error() -> None:
    assert issubclass(errors.SchemaOutOfDate, errors.DatabaseError)


def test_reserved_name_is_not_an_invalid_name() -> None:
    assert not issubclass(errors.ReservedName, errors.InvalidName)
    assert not issubclass(errors.InvalidName, errors.ReservedName)


def test_the_docstring_draws_every_class_under_its_real_parent() -> None:
    tree = drawn_tree()
    assert set(tree) == {cls.__name__ for cls in ERROR_CLASSES}
    for cls in ERROR_CLASSES:
        parent, drawn_as_value_error = tree[cls.__name__]
        if cls is errors.AlkstoreError:
            assert parent is None
            continue
        real_parent = next(base for base in cls.__mro__[1:] if base.__module__ == errors.__name__)
        assert parent == real_parent.__name__, cls.__name__
        assert drawn_as_value_error == (ValueError in cls.__bases__), cls.__name__
