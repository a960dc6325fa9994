"""The exit statuses of the ``alkstore`` command line, in one place (``docs/operations.md`` lists them)."""

from __future__ import annotations

__all__ = ["EXIT_ABORTED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE"]

#: Done; for ``healthcheck``: healthy.
EXIT_OK = 0
#: A runtime error, or a command that could not do all it was asked; for ``healthcheck``: unhealthy.
EXIT_ERROR = 1
#: A usage error: one ``alkstore: …`` line on stderr.
EXIT_USAGE = 2
#: Aborted by a second Ctrl-C.
EXIT_ABORTED = 130
