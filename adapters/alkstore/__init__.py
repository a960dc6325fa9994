"""The adapters' half of the ``alkstore`` package: a marker for tools, never imported.

The package ``alkstore`` is ``core/alkstore``; its ``__init__`` extends its ``__path__`` to
this directory, so ``alkstore.adapters`` is found here. This file exists so that type checkers
and editors (pyright, jedi) see ``adapters/`` as part of the package too; the wheel leaves it
out (ADR 013). It is imported only if ``adapters/`` precedes ``core/`` on ``sys.path``.
"""

raise ImportError(
    "the adapters' half of alkstore was imported as the package itself: put core/ before adapters/ "
    "on sys.path (the editable install does: pip install -e .)"
)
