"""A PostgreSQL cluster the nemesis owns: made in a temporary directory, started, restarted at will, removed.

The run restarts its server (``pg_ctl restart -m fast`` or ``-m immediate``, a crash and
recovery), which it must not do to a server others use. The cluster runs as the current user,
or as ``postgres`` when that is root (the server refuses to run as root), with trust
authentication on 127.0.0.1 and a free port, fsync on as a real server has it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["Cluster", "ClusterUnavailable"]

#: The server's settings: enough connections for every process of a run and their pools.
SETTINGS = ("listen_addresses=127.0.0.1", "max_connections=200", "shared_buffers=64MB")


class ClusterUnavailable(RuntimeError):
    """The server's programs are missing, or the cluster could not be made or started."""


def _bindir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are: ``pg_config --bindir``, else the newest Debian install."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    installs = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not installs:
        raise ClusterUnavailable("no initdb: install the PostgreSQL server (Debian: postgresql)")
    return installs[-1].parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """One temporary cluster: ``with Cluster() as cluster: cluster.url; cluster.restart("immediate")``."""

    def __init__(self) -> None:
        self._bin = _bindir()
        self._as: list[str] = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.home = Path(tempfile.mkdtemp(prefix="alkstore-nemesis-"))
        self.data = self.home / "data"
        self.port = _free_port()
        #: A DSN for the cluster's ``postgres`` database, as its superuser.
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        command = [*self._as, str(self._bin / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ClusterUnavailable(f"{program} {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        """Make the cluster and start it; returns once it accepts connections."""
        if self._as:
            shutil.chown(self.home, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = " ".join(f"-c {setting}" for setting in (*SETTINGS, f"port={self.port}"))
        options += f" -c unix_socket_directories={self.home}"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.home / "server.log"), "-o", options, "-w", "start")

    def restart(self, mode: str) -> None:
        """Restart the server: ``fast`` (clients disconnected, a checkpoint) or ``immediate`` (a crash, then
        recovery from the WAL); returns once it accepts connections again."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.home / "server.log"), "-m", mode, "-w", "restart")

    def stop(self) -> None:
        """Stop the server (if it runs) and remove the cluster."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
