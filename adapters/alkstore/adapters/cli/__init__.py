"""The ``alkstore`` command line: a driving adapter over the public API.

``alkstore demo`` shows the embedded engine at work; ``migrate``, ``tick`` and
``run-schedules`` operate a database; ``status``, ``jobs``, ``schedules`` and ``healthcheck``
inspect and act on one (their URL from ``--url`` or ``$ALKSTORE_URL``). Exit status: 0 ok,
1 runtime error, 2 usage error.
"""

from __future__ import annotations

from ._args import URL_VARIABLE
from ._exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from ._main import build_parser, main

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "URL_VARIABLE", "build_parser", "main"]
