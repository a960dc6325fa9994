"""``python -m alkstore …``: the same command line as the ``alkstore`` console script."""

from __future__ import annotations

import sys
from importlib import metadata


def main() -> int:
    """Run the installed ``alkstore`` console script (found by entry point, so core imports no adapter)."""
    scripts = metadata.entry_points(group="console_scripts", name="alkstore")
    if not scripts:
        print("alkstore: the command line is not installed (pip install alkstore)", file=sys.stderr)
        return 2
    result = next(iter(scripts)).load()()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
