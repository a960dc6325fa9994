"""Frozen dataclasses made at the cost of plain assignments: what core and the engines make one of per job.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own ``__setattr__``
refuses), about 800 instructions a field: a claimed job's record (29 values) and its ``Job`` (35) cost more to
make than to claim. ``assembler(cls)`` makes them as a twin class instead: ``cls``'s own slots on ``cls``'s
own base, the same layout, its ``__init__`` the same parameters assigned plainly; the finished object is then
made a ``cls`` (``__class__``, allowed between classes of one layout). The object is the one ``cls(...)``
makes, for a class with no ``__post_init__`` and every field in its ``__init__`` (checked here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

__all__ = ["assembler"]

_T = TypeVar("_T")
#: Both names of the attribute-setting slot back to ``object``'s (one alone would leave the frozen class's other
#: in it, and every assignment would call ``object.__setattr__`` through it).
_PLAIN = {"__setattr__": object.__setattr__, "__delattr__": object.__delattr__}


def assembler(cls: type[_T]) -> Callable[..., _T]:
    """A maker of ``cls`` (a frozen dataclass with slots) taking what ``cls(...)`` takes."""
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields(cls)):  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__} has a __post_init__ or a field outside __init__: it cannot be assembled")
    parameters: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    scope: dict[str, Any] = {"_MISSING": MISSING}
    for at, f in enumerate(fields(cls)):  # type: ignore[arg-type]
        if f.default is not MISSING:
            scope[f"_d{at}"] = f.default
            given = f"{f.name}=_d{at}"
        elif f.default_factory is not MISSING:
            scope[f"_f{at}"] = f.default_factory
            given = f"{f.name}=_MISSING"
            body.append(f"    if {f.name} is _MISSING: {f.name} = _f{at}()")
        else:
            given = f.name
        (keywords if f.kw_only else parameters).append(given)
        body.append(f"    self.{f.name} = {f.name}")
    signature = ", ".join(["self", *parameters, *(["*", *keywords] if keywords else [])])
    exec(f"def __init__({signature}) -> None:\n" + "\n".join(body), scope)
    twin = type(
        f"_Assembling{cls.__name__}",
        cls.__bases__,
        {"__slots__": cls.__dict__["__slots__"], "__init__": scope["__init__"], **_PLAIN},
    )

    def make(*args: Any, **kwargs: Any) -> _T:
        made: Any = twin(*args, **kwargs)
        made.__class__ = cls
        return made  # type: ignore[no-any-return]

    make.__doc__ = f"``{cls.__name__}(...)``, made by plain assignments (``assembler``)."
    return make
