"""PgBouncer for the tests: a private process per pool mode, in front of the test server.

Each ``PgBouncer`` listens on a free loopback port with its configuration in a temporary
directory, trusts every client (the test server trusts them too) and forwards every database
to the server behind ``pg_dsn``. PgBouncer refuses to run as root, so as root it is started
with ``-u`` and the account of the server's files (``postgres``, else ``nobody``). Without a ``pgbouncer``
binary the tests that need one skip; under ``CI=true`` they fail (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.support import PATIENCE, under_ci

__all__ = ["PgBouncer", "pgbouncer_binary", "running_pgbouncer"]

#: Where Debian's package puts the binary, in case /usr/sbin is not on PATH.
_KNOWN_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
#: The accounts PgBouncer may drop to when started as root, the first that exists.
_RUN_AS = ("postgres", "nobody")


def pgbouncer_binary() -> str:
    """The ``pgbouncer`` executable, or a skip (a failure under CI=true) saying it is missing."""
    found = shutil.which("pgbouncer") or next((path for path in _KNOWN_PATHS if os.access(path, os.X_OK)), None)
    if found is not None:
        return found
    reason = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    if under_ci():
        pytest.fail(reason + " (CI=true: the PgBouncer tests must run)", pytrace=False)
    pytest.skip(reason)


def _account() -> pwd.struct_passwd:
    for name in _RUN_AS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError(f"PgBouncer will not run as root, and none of {_RUN_AS} exists to run it as")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    """One running PgBouncer process: its mode, pool size and the URL that reaches the server through it."""

    def __init__(self, binary: str, server_dsn: str, mode: str, pool_size: int) -> None:
        self.mode = mode
        self.pool_size = pool_size
        self._server = conninfo_to_dict(server_dsn)
        self._dir = Path(tempfile.mkdtemp(prefix=f"alkstore-pgbouncer-{mode}-"))
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        try:
            self._start(binary)
        except BaseException:
            self.stop()
            raise

    def url(self, **params: str) -> str:
        """A URL of the server's database and user through this PgBouncer (query ``params`` added)."""
        user = quote(str(self._server.get("user") or "postgres"), safe="")
        dbname = quote(str(self._server.get("dbname") or "postgres"), safe="")
        query = urlencode({"connect_timeout": "10", **params})
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}?{query}"

    @property
    def log(self) -> str:
        """What PgBouncer logged so far."""
        path = self._dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _config(self, port: int) -> str:
        server_host = self._server.get("host") or "127.0.0.1"
        server_port = self._server.get("port") or "5432"
        user = self._server.get("user") or "postgres"
        password = self._server.get("password") or ""  # what PgBouncer logs in to the server with
        (self._dir / "users.txt").write_text(f'"{user}" "{password}"\n')
        return "\n".join(
            [
                "[databases]",
                f"* = host={server_host} port={server_port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self._dir / 'users.txt'}",
                f"pool_mode = {self.mode}",
                f"default_pool_size = {self.pool_size}",
                "min_pool_size = 0",
                "reserve_pool_size = 0",
                "max_client_conn = 200",
                "server_reset_query = DISCARD ALL",
                "ignore_startup_parameters = extra_float_digits",
                "log_connections = 0",
                "log_disconnections = 0",
                "",
            ]
        )

    def _start(self, binary: str) -> None:
        command = [binary]
        if os.geteuid() == 0:
            account = _account()
            os.chown(self._dir, account.pw_uid, account.pw_gid)
            command += ["-u", account.pw_name]
        self._dir.chmod(0o755)
        for _attempt in range(5):  # a free port may be taken by someone else before PgBouncer binds it
            self.port = _free_port()
            config = self._dir / "pgbouncer.ini"
            config.write_text(self._config(self.port))
            for path in self._dir.iterdir():
                path.chmod(0o644)
            with open(self._dir / "pgbouncer.log", "ab") as log:
                self._process = subprocess.Popen(
                    [*command, str(config)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            if self._wait_ready():
                return
            self._terminate()
        raise RuntimeError(f"PgBouncer ({self.mode}) did not start; its log:\n{self.log}")

    def _wait_ready(self) -> bool:
        end = time.monotonic() + PATIENCE
        while time.monotonic() < end:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                with psycopg.connect(self.url(connect_timeout="2"), autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # immediate shutdown: client and server connections are closed
        try:
            process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(PATIENCE)

    def stop(self) -> None:
        """Stop the process and remove its files."""
        self._terminate()
        shutil.rmtree(self._dir, ignore_errors=True)


@contextmanager
def running_pgbouncer(server_dsn: str, mode: str, pool_size: int) -> Iterator[PgBouncer]:
    """A PgBouncer in ``mode`` (``session`` or ``transaction``) with ``pool_size`` server connections a pool."""
    bouncer = PgBouncer(pgbouncer_binary(), server_dsn, mode, pool_size)
    try:
        yield bouncer
    finally:
        bouncer.stop()
