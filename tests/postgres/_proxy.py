"""A TCP proxy in front of the test server, for outages on demand: ``cut()`` drops every connection
through it and refuses new ones, ``restore()`` lets them through again."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self
from urllib.parse import urlencode

from psycopg.conninfo import conninfo_to_dict

__all__ = ["Proxy"]


class Proxy:
    """Forwards ``127.0.0.1:<port>`` to the server of ``dsn``; ``url`` is ``dsn`` through the proxy."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        self._target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        through = {**params, "host": "127.0.0.1", "port": str(self.port)}
        self.url = "postgresql://?" + urlencode({key: str(value) for key, value in through.items()})
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._up = True
        self._closed = False
        self.refused = 0  # connections refused while cut
        self._acceptor = threading.Thread(target=self._accept, name="test-proxy", daemon=True)

    def __enter__(self) -> Self:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cut(self) -> None:
        """The outage begins: every open connection is dropped, and new ones are closed at once."""
        with self._lock:
            self._up = False
            doomed = list(self._sockets)
            self._sockets.clear()
        for sock in doomed:
            _drop(sock)

    def restore(self) -> None:
        """The outage ends: new connections go through again."""
        with self._lock:
            self._up = True

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.cut()
        self._listener.close()
        self._acceptor.join(timeout=5)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while True:
            with self._lock:
                if self._closed:
                    return
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                up = self._up and not self._closed
                if not up:
                    self.refused += 1
            if not up:
                _drop(client)
                continue
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                _drop(client)
                continue
            client.settimeout(None)
            server.settimeout(None)
            with self._lock:
                self._sockets.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes from ``source`` to ``sink`` until either side goes; then close both."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _drop(source)
        _drop(sink)


def _drop(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
