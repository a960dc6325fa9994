"""Running the installed ``alkstore`` command line in a subprocess, and reading its output live."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: The console script installed beside the interpreter running the tests.
ALKSTORE = str(Path(sys.executable).with_name("alkstore"))


def command_env() -> dict[str, str]:
    """The environment for a child: unbuffered, colourless, no inherited CI quirks."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_COLOR"] = "1"
    return env


def run(args: Sequence[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``args`` to completion (a generous timeout only guards against a hang)."""
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, env=command_env(), stdin=subprocess.DEVNULL
    )


class LiveProcess:
    """A child process whose stdout and stderr lines are collected as they arrive."""

    def __init__(self, args: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**command_env(), **(env or {})},
            cwd=cwd,
        )
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(name, stream), daemon=True)
            for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str, stream: object) -> None:
        assert hasattr(stream, "readline")
        for line in iter(stream.readline, ""):
            (self.stdout if name == "stdout" else self.stderr).append(line)
            self.lines.put((name, line))

    def wait_for(self, predicate: Callable[[str, str], bool], timeout: float) -> str:
        """Block until a line (stream name, text) satisfies ``predicate``; return it, or fail after ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no expected line after {timeout} s; stdout={''.join(self.stdout)!r} "
                    f"stderr={''.join(self.stderr)!r}"
                )
            try:
                name, line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(
                        f"process exited ({self.proc.returncode}) before the expected line; "
                        f"stdout={''.join(self.stdout)!r} stderr={''.join(self.stderr)!r}"
                    ) from None
                continue
            if predicate(name, line):
                return line

    def wait_log(self, predicate: Callable[[str], object], timeout: float) -> str:
        """Block until a line of stderr (the log) satisfies ``predicate``; return it, or fail after ``timeout``."""
        return self.wait_for(lambda name, line: name == "stderr" and bool(predicate(line)), timeout)

    def finish(self, timeout: float = 60.0) -> int:
        """Wait (at most ``timeout``) for the exit status; the output is then complete."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        """Kill the child if it still runs, drain its output, close the pipes. Idempotent."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> LiveProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
