"""``alkstore web`` as a process: uvicorn serves the dashboard over the store it opens, until SIGINT."""

from __future__ import annotations

import http.client
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import alkstore
from alkstore.testing import Scratch
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, under_ci


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Page:
    status_code: int
    text: str


def get(url: str) -> Page:
    """``url``, asked again while nothing listens there yet."""
    end = time.monotonic() + PATIENCE
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return Page(response.status, response.read().decode())
        except urllib.error.HTTPError as exc:
            return Page(exc.code, exc.read().decode())
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def test_the_command_serves_the_stores_dashboard_until_interrupted(scratch: Scratch) -> None:
    where = scratch()
    try:
        with alkstore.open(where.url, **where.options) as store:  # migrates a Postgres scratch schema
            store.queue("served").enqueue({"hello": "web"})
        port = free_port()
        args = [ALKSTORE, "web", "--url", where.url, "--port", str(port), "--read-only"]
        schema = where.options.get("schema")
        if schema is not None:
            args += ["--schema", schema]
        with LiveProcess(args) as web:
            web.wait_log(lambda line: f"at http://127.0.0.1:{port}/" in line, PATIENCE)
            page = get(f"http://127.0.0.1:{port}/")
            assert page.status_code == 200
            assert "read-only" in page.text
            if where.url == "memory://":  # the command's memory store is its own, and empty
                assert "No jobs in any queue." in page.text
            else:
                assert 'data-queue="served"' in page.text
            assert get(f"http://127.0.0.1:{port}/dead").status_code == 200
            web.proc.send_signal(signal.SIGINT)
            assert web.finish(PATIENCE) == 0
    finally:
        where.dispose()


def test_the_demo_with_web_serves_its_own_stores_dashboard_until_interrupted() -> None:
    port = free_port()
    with LiveProcess([ALKSTORE, "demo", "--web", "--port", str(port)]) as demo:
        demo.wait_log(lambda line: f"dashboard of this demo is at http://127.0.0.1:{port}/" in line, PATIENCE)
        demo.wait_for(lambda stream, line: stream == "stdout" and " written " in line, PATIENCE)
        page = get(f"http://127.0.0.1:{port}/")
        assert page.status_code == 200
        assert '<tr data-worker="worker-1">' in page.text  # the demo's own worker: its store, not an empty one
        assert get(f"http://127.0.0.1:{port}/schedules").text.count("<tr data-schedule=") == 2
        demo.proc.send_signal(signal.SIGINT)
        assert demo.finish(PATIENCE) == 0
    assert "summary after" in "".join(demo.stdout)


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by ``openssl`` (a failure under CI without it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        if under_ci():
            pytest.fail("no openssl to make a certificate with", pytrace=False)
        pytest.skip("no openssl to make a certificate with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return cert, key


def test_with_a_certificate_and_its_key_the_command_serves_https_alone(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    port = free_port()
    args = [ALKSTORE, "web", "--url", "memory://", "--port", str(port), "--certfile", str(cert), "--keyfile", str(key)]
    with LiveProcess(args) as web:
        web.wait_log(lambda line: f"at https://127.0.0.1:{port}/" in line, PATIENCE)
        trusting = ssl.create_default_context(cafile=str(cert))
        end = time.monotonic() + PATIENCE
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/schedules", timeout=5, context=trusting) as page:
                    status, cookie, text = page.status, page.headers["set-cookie"], page.read().decode()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        assert status == 200
        assert "Add a schedule" in text
        assert "Secure" in cookie  # the session's cookie never travels in clear
        with pytest.raises(urllib.error.URLError):  # a client that does not trust it is refused
            urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=5)
        with pytest.raises((http.client.HTTPException, OSError)):  # and plain HTTP gets no page
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
        web.proc.send_signal(signal.SIGINT)
        assert web.finish(PATIENCE) == 0
