"""One host's part in ``test_skewed_hosts``: run as its own process, often under ``faketime``.

    python _skewed_host.py COMMAND --dsn DSN --schema SCHEMA [--clock default|system] [options]

``--clock default`` is what ``alkstore.open`` gives (the database's clock); ``--clock system``
is the host's own clock, the old default (ADR 008), for the control runs. Each command prints
one JSON object on stdout; ``serve`` logs as ``alkstore run-schedules`` does, on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import alkstore
from alkstore import EnqueueOpts, StopToken, Store, SystemClock
from alkstore.scheduler._runner import serve_schedules


def _open(args: argparse.Namespace) -> Store:
    clock = SystemClock() if args.clock == "system" else None
    return alkstore.open(args.dsn, schema=args.schema, clock=clock, max_size=2)


def info(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """This host's wall clock and its store's clock, side by side."""
    return {"wall": datetime.now(UTC).isoformat(), "store": store.clock.now().isoformat()}


def enqueue(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    opts = EnqueueOpts(expires=args.expires, visibility_timeout=args.visibility)
    return {"id": store.queue(args.queue).enqueue({"from": "skewed host"}, opts)}


def claim(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    job = store.queue(args.queue).claim(args.worker)
    if job is None:
        return {"id": None}
    assert job.lease_until is not None
    return {"id": job.id, "lease_until": job.lease_until.isoformat()}


def lock(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    held = store.try_lock(args.name, args.worker, args.ttl)
    return {"acquired": held is not None, "token": None if held is None else held.token}


def register(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    schedule = store.schedule(args.name, args.spec, args.queue)
    return {"next_boundary": schedule.next_boundary.isoformat()}


def serve(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """Lead the scheduler or stand by until SIGTERM, logging as ``alkstore run-schedules`` does."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    logging.getLogger("alkstore").addHandler(handler)
    logging.getLogger("alkstore").setLevel(logging.INFO)
    stop = StopToken()
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
    serve_schedules(store.engine, store.clock, stop)
    return {"stopped": True}


COMMANDS = {"info": info, "enqueue": enqueue, "claim": claim, "lock": lock, "register": register, "serve": serve}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--clock", choices=["default", "system"], default="default")
    parser.add_argument("--queue", default="jobs")
    parser.add_argument("--worker", default="skewed")
    parser.add_argument("--name", default="report")
    parser.add_argument("--spec", default="@every 2s")
    parser.add_argument("--ttl", type=float, default=30.0)
    parser.add_argument("--expires", type=float)
    parser.add_argument("--visibility", type=float)
    args = parser.parse_args()
    with _open(args) as store:
        result = COMMANDS[args.command](store, args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
