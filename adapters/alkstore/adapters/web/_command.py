"""``alkstore web``: serve the dashboard with uvicorn (an ``alkstore.commands`` entry point).

The command line loads this module to build its parser, so it imports no web framework; those
(and the store) come when the command runs. Refuses to listen beyond loopback without
authentication or ``--insecure`` (ADR 038), and serves actions that way only with ``--insecure-actions``
too (ADR 060).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import alkstore

from ._security import (
    MIN_TOKEN_LENGTH,
    READ_TOKEN_VARIABLE,
    TOKEN_VARIABLE,
    AllowedHosts,
    allowed_hosts,
    bind_refusal,
    insecure_warning,
    is_loopback,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "add_commands", "check_bind", "hosts_of", "serve_dashboard"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: The command line's exit statuses (``alkstore.adapters.cli``'s): runtime and usage errors.
_EXIT_ERROR = 1
_EXIT_USAGE = 2
_URL_VARIABLE = "ALKSTORE_URL"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is from 0 to 65535, not {value}")
    return value


def _host_name(text: str) -> str:
    """An ``--allowed-host``: ``name`` or ``name:port``."""
    try:
        AllowedHosts([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def hosts_of(args: argparse.Namespace) -> AllowedHosts:
    """The hosts ``alkstore web`` answers to: the loopback names and the bound address on its port, and
    every ``--allowed-host``."""
    return allowed_hosts(args.host, args.port, args.allowed_host or ())


def _token() -> str | None:
    return os.environ.get(TOKEN_VARIABLE) or None


def _anyone_acts(args: argparse.Namespace) -> bool:
    """Whether anyone who can connect may act: no token, beyond loopback, actions served."""
    return _token() is None and not is_loopback(args.host) and not args.read_only


def check_bind(args: argparse.Namespace) -> None:
    """The command's usage rules (exit 2): no address beyond loopback without a token or ``--insecure``,
    which serves actions only with ``--insecure-actions`` too; TLS needs a certificate and its key."""
    refusal = bind_refusal(
        args.host,
        token=_token(),
        insecure=args.insecure,
        read_only=args.read_only,
        insecure_actions=args.insecure_actions,
    )
    if refusal is None:
        refusal = _read_token_refusal(args)
    if refusal is None:
        refusal = _tls_refusal(args)
    if refusal is not None:
        args.web_parser.exit(_EXIT_USAGE, f"alkstore: {refusal}\n")


def _read_token_refusal(args: argparse.Namespace) -> str | None:
    """Why ``$ALKSTORE_WEB_READ_TOKEN`` cannot serve (ADR 068), or ``None``: it goes beside the full token,
    differs from it, and beyond loopback is as strong as the full token must be."""
    reader = os.environ.get(READ_TOKEN_VARIABLE) or None
    if reader is None:
        return None
    if _token() in (None, reader):
        return f"${READ_TOKEN_VARIABLE} goes beside ${TOKEN_VARIABLE}, and differs from it"
    weak = bind_refusal(args.host, token=reader, insecure=False)
    return None if weak is None else weak.replace(TOKEN_VARIABLE, READ_TOKEN_VARIABLE)


def _tls_refusal(args: argparse.Namespace) -> str | None:
    """Why ``--certfile`` and ``--keyfile`` cannot serve HTTPS, or ``None``."""
    if (args.certfile is None) != (args.keyfile is None):
        return "--certfile and --keyfile go together (the certificate chain, and its private key)"
    for option, path in (("--certfile", args.certfile), ("--keyfile", args.keyfile)):
        if path is not None and not os.path.isfile(path):
            return f"{option} {path}: no such file"
    return None


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ._app import create_app
    except ImportError as exc:
        print(f"alkstore: the dashboard needs its extra: pip install 'alkstore[web]' ({exc})", file=sys.stderr)
        return _EXIT_ERROR
    options: dict[str, Any] = {} if args.schema is None else {"schema": args.schema}

    async def open_store() -> alkstore.AsyncStore:
        return await alkstore.open_async(args.url, **options)

    async def check_store() -> None:
        await (await open_store()).close()

    # Opened once before anything is said: a store that cannot open (no server, a schema not
    # migrated) is the command line's one-line runtime error, not uvicorn's startup traceback.
    asyncio.run(check_store())
    hosts = hosts_of(args)
    warning = insecure_warning(args.host, args.port) if _anyone_acts(args) else None
    app = create_app(open_store, read_only=args.read_only, allowed_hosts=hosts, warning=warning)
    scheme = "https" if args.certfile else "http"
    where = f"{scheme}://{args.host}:{args.port}/"
    mode = " (read-only)" if args.read_only else ""
    print(f"alkstore: serving the dashboard{mode} at {where}; Ctrl-C stops it", file=sys.stderr, flush=True)
    print(f"alkstore: it answers to the hosts {', '.join(hosts.names())}", file=sys.stderr, flush=True)
    if warning is not None:
        print(f"alkstore: WARNING: {warning}", file=sys.stderr, flush=True)
    tls = {"ssl_certfile": args.certfile, "ssl_keyfile": args.keyfile} if args.certfile else {}
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", lifespan="on", **tls)
    except SystemExit as exc:  # uvicorn exits 3 when the app fails to start (it has logged why)
        return 0 if exc.code in (0, None) else _EXIT_ERROR
    return 0


#: How long ``serve_dashboard`` waits for uvicorn to listen, or to stop (seconds).
_START_STOP_SECONDS = 30.0


@contextmanager
def serve_dashboard(store: alkstore.Store, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST) -> Iterator[str]:
    """Serve the dashboard over a sync ``store`` on a thread while the block runs; yield its URL.

    For a process whose store is the sync runtime's (``alkstore demo --web`` finds this through the
    ``alkstore.dashboards`` entry point). Loopback only: no token, no ``--insecure`` here. Port 0
    takes a free port. Raises ``ImportError`` without the ``web`` extra.
    """
    import uvicorn

    from ._app import create_app

    refusal = bind_refusal(host, token=None, insecure=False)
    if refusal is not None:
        raise ValueError(refusal)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, port))
    app = create_app(store, allowed_hosts=allowed_hosts(host, sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="alkstore-web", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _START_STOP_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the dashboard's server did not start")
            time.sleep(0.02)
        where = host if ":" not in host else f"[{host}]"
        yield f"http://{where}:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join(_START_STOP_SECONDS)
        sock.close()


def add_commands(commands: Any) -> None:
    """Register ``web`` on ``commands`` (the command line's subparsers)."""
    web: argparse.ArgumentParser = commands.add_parser(
        "web",
        help="serve the web dashboard (needs the alkstore[web] extra)",
        description="Serve a web dashboard of the queues, their jobs, dead letters and schedules. It listens on "
        f"127.0.0.1 unless --host says; any other address needs ${TOKEN_VARIABLE} (an access token of at least "
        f"{MIN_TOKEN_LENGTH} characters every request must present, as basic auth's password) or --insecure; "
        f"${READ_TOKEN_VARIABLE} may add a second token that reads every page and acts on nothing. "
        "It answers only to the Host names it is reached under: the loopback ones and each --allowed-host.",
    )
    web.add_argument(
        "--url",
        help=f"the database, e.g. postgresql://user@host:5432/dbname (default: ${_URL_VARIABLE})",
    )
    web.add_argument("--schema", help="the schema holding alkstore's tables (default: the engine's, 'alkstore')")
    web.add_argument("--host", default=DEFAULT_HOST, help=f"the address to listen on (default: {DEFAULT_HOST})")
    web.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT})")
    web.add_argument(
        "--allowed-host",
        action="append",
        type=_host_name,
        metavar="NAME",
        help="a name (or name:port) clients reach the dashboard under, beyond the loopback names and the "
        "--host address; a request to any other Host is refused (repeatable)",
    )
    web.add_argument("--read-only", action="store_true", help="show only: no requeue or purge is reachable")
    web.add_argument("--certfile", metavar="PATH", help="serve HTTPS with this certificate (PEM; with --keyfile)")
    web.add_argument("--keyfile", metavar="PATH", help="the certificate's private key (PEM)")
    web.add_argument(
        "--insecure",
        action="store_true",
        help=f"listen beyond loopback without ${TOKEN_VARIABLE}: anyone who can connect may read (behind a proxy "
        "that authenticates, say); with --read-only, or --insecure-actions to let them act too",
    )
    web.add_argument(
        "--insecure-actions",
        action="store_true",
        help="with --insecure and without --read-only: anyone who can connect may also requeue, purge, pause and "
        "cancel (every page says so)",
    )
    web.set_defaults(run=_serve, check=check_bind, web_parser=web, database_parser=web)
