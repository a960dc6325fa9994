"""The SQLite engine's URL and options, checked before the file is touched.

``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` (the path is what follows the
third slash, as SQLAlchemy reads it). The URL's query and the keyword options take the same names:
``synchronous`` (``normal``, the default, or ``full``), ``busy_timeout`` (seconds a call waits for
the file's write lock before ``DatabaseUnavailable``, default 5), ``poll_interval`` (seconds
between two looks at the file's data version by a parked waiter, default 0.005), ``migrate``
(default ``True``: a new or older file is brought up to date on open) and ``check`` (default
``False``: ``True`` runs ``PRAGMA quick_check`` on open).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from alkstore.errors import DatabaseError, InvalidOptions

__all__ = ["NETWORK_FILESYSTEMS", "SqliteOptions", "filesystem_of", "parse_options"]

#: Filesystems whose locks (or shared memory, which WAL needs) do not hold between hosts: a file on one
#: is refused, since two processes could then both hold the write lock (ADR 063).
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "davfs", "fuse.sshfs"}
)
_MOUNTS = "/proc/self/mounts"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class SqliteOptions:
    """Where the file is and how the engine treats it."""

    path: str
    synchronous: str = "normal"
    busy_timeout: float = 5.0
    poll_interval: float = 0.005
    migrate: bool = True
    check: bool = False


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise InvalidOptions(f"the sqlite option {name} takes true or false, not {value!r}")


def _seconds(name: str, value: Any, low: float, high: float) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise InvalidOptions(f"the sqlite option {name} takes seconds, not {value!r}") from None
    if isinstance(value, bool) or not low <= seconds <= high:
        raise InvalidOptions(f"the sqlite option {name} takes {low} to {high} seconds, not {value!r}")
    return seconds


def filesystem_of(directory: str, mounts: str) -> str | None:
    """The type of the filesystem holding ``directory`` (a real path), from the text of ``/proc/self/mounts``."""
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = directory == point or directory.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def _network_filesystem(directory: str) -> str | None:
    try:
        with open(_MOUNTS, encoding="utf-8", errors="replace") as mounts:
            kind = filesystem_of(os.path.realpath(directory), mounts.read())
    except OSError:
        return None  # not Linux: nothing to tell from
    return kind if kind in NETWORK_FILESYSTEMS else None


def parse_options(url: str, options: dict[str, Any]) -> SqliteOptions:
    """The options of ``url`` and the keyword ``options`` (which win), checked; the file's directory must exist."""
    if not isinstance(url, str) or not url.lower().startswith("sqlite:///"):
        raise InvalidOptions(f"the sqlite engine takes 'sqlite:///path/to/file.db', not {url!r}")
    rest = url[len("sqlite:///") :]
    path, _, query = rest.partition("?")
    path = unquote(path)
    if not path or path == ":memory:" or path.endswith("/"):
        raise InvalidOptions(f"the sqlite engine needs the path of a file, not {url!r}")
    given: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    given.update(options)
    known = {"synchronous", "busy_timeout", "poll_interval", "migrate", "check"}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidOptions(f"the sqlite engine takes no option {', '.join(unknown)}")
    synchronous = str(given.get("synchronous", "normal")).lower()
    if synchronous not in ("normal", "full"):
        raise InvalidOptions(f"the sqlite option synchronous takes normal or full, not {given['synchronous']!r}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise DatabaseError(f"the directory of the SQLite file {path!r} does not exist; nothing was written")
    # A file whose mode grants no write is read-only to the engine even where the process could write through
    # it (root): its owner made it so.
    network = _network_filesystem(directory)
    if network is not None:
        raise DatabaseError(
            f"the SQLite file {path!r} is on a {network} filesystem, whose locks do not hold between hosts;"
            " keep it on a local disk (nothing was written)"
        )
    if os.path.exists(path) and (not os.access(path, os.R_OK | os.W_OK) or not os.stat(path).st_mode & 0o222):
        raise DatabaseError(f"the SQLite file {path!r} is read-only to this process; nothing was written")
    if not os.access(directory, os.W_OK):
        raise DatabaseError(
            f"the directory of the SQLite file {path!r} is read-only (WAL keeps files beside it); nothing was written"
        )
    return SqliteOptions(
        path=path,
        synchronous=synchronous,
        busy_timeout=_seconds("busy_timeout", given.get("busy_timeout", 5.0), 0.0, 3600.0),
        poll_interval=_seconds("poll_interval", given.get("poll_interval", 0.005), 0.001, 10.0),
        migrate=_flag("migrate", given.get("migrate", True)),
        check=_flag("check", given.get("check", False)),
    )
