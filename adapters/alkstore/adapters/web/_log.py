"""The console's action log (ADR 068): each action a dashboard takes is logged in the store, and a page lists them.

An action's handler says what came of it (``_done`` leaves the message in ``request.state.outcome``);
``logged`` wraps the handler and writes one entry per action taken or refused once its form passed
the security checks (``request.state.checked``): who (the request's role and client address), what
(the route's name), on what, when (the store's clock) and the outcome. A confirmation page is no
action and logs nothing. A form refused by the security checks is not logged: anyone can send one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from alkstore import ActionInfo, NotOffered
from alkstore.errors import AlkstoreError, InvalidArgument, InvalidOptions

from ._security import OPEN, ROLE_KEY

__all__ = ["ACTIONS_PAGE", "OUTCOME_CHARS", "TARGET_CHARS", "logged", "read_page", "role_of_request"]

#: The entries the Actions page lists at a time (``?before=`` an id pages on).
ACTIONS_PAGE = 100
#: The characters of a target and of an outcome the console logs (longer ones are cut, ``…`` says where).
TARGET_CHARS = 300
OUTCOME_CHARS = 1000
#: What each path parameter of an action's route names, in a logged target.
_NOUNS = {"queue": "queue", "job_id": "job", "schedule": "schedule"}

Handler = Callable[[Request], Awaitable[Response]]


class _Logging(Protocol):
    """What a store must offer the log: ``AsyncStore``'s calls, or the threaded sync store's."""

    async def log_action(self, action: str, target: str, outcome: str, *, role: str, address: str) -> int: ...

    async def actions(self, *, limit: int = 50, before: int | None = None) -> list[ActionInfo]: ...


def role_of_request(request: Request) -> str:
    """The role the guard found the request in (``OPEN`` where no token is configured)."""
    return str(request.scope.get(ROLE_KEY, OPEN))


def _cut(text: str, most: int) -> str:
    """``text`` without NUL (spelled ``\\x00``: the store refuses it), at most ``most`` characters."""
    text = text.replace("\x00", "\\x00")
    return text if len(text) <= most else text[: most - 1] + "…"


def _target(request: Request) -> str:
    """What the action was on: what its handler said (``request.state.target``), else its path's names."""
    said = getattr(request.state, "target", None)
    if said is not None:
        return str(said)
    return ", ".join(f"{_NOUNS.get(key, key)} {value}" for key, value in request.path_params.items())


async def _record(store: _Logging, request: Request, action: str, outcome: str) -> None:
    """Log ``action`` by the request's role and client, with ``outcome``; nothing on an engine without the log."""
    client = request.client
    address = client.host if client and client.host and client.host.isprintable() else "unknown"
    try:
        await store.log_action(
            action,
            _cut(_target(request), TARGET_CHARS),
            _cut(outcome, OUTCOME_CHARS) or "(nothing said)",
            role=role_of_request(request),
            address=_cut(address.strip(), 128) or "unknown",
        )
    except NotOffered:  # an engine that stops at the runtime port keeps no log (ADR 062)
        return


def logged(store: Callable[[], _Logging], action: str, handler: Handler) -> Handler:
    """``handler``, logging what it did as ``action`` once the request's form passed the security checks."""

    async def run(request: Request) -> Response:
        try:
            response = await handler(request)
        except HTTPException as exc:
            if getattr(request.state, "checked", False):
                await _record(store(), request, action, f"refused ({exc.status_code}): {exc.detail}")
            raise
        except Exception as exc:
            if getattr(request.state, "checked", False):
                with suppress(AlkstoreError):  # the store that failed the action may fail its log: the error stands
                    await _record(store(), request, action, f"failed: {type(exc).__name__}")
            raise
        outcome = getattr(request.state, "outcome", None)
        if outcome is not None:
            await _record(store(), request, action, str(outcome))
        return response

    return run


async def read_page(store: _Logging, before_text: str | None) -> dict[str, Any]:
    """The Actions page's context: ``ACTIONS_PAGE`` entries, newest first, before the id ``before_text`` names."""
    try:
        before = int(before_text) if before_text else None
        entries = await store.actions(limit=ACTIONS_PAGE + 1, before=before)
    except (ValueError, InvalidArgument, InvalidOptions):
        raise HTTPException(400, "that is not an entry of the log to list before") from None
    more = len(entries) > ACTIONS_PAGE
    entries = entries[:ACTIONS_PAGE]
    return {
        "entries": entries,
        "before": before,
        "next_before": entries[-1].id if more else None,
        "size": ACTIONS_PAGE,
    }
