"""The dashboard's ASGI application: server-rendered pages over ``AsyncStore``'s public API (ADR 038).

Reads are GETs that work without JavaScript; when JavaScript runs, each page that shows counts
refreshes its live region from a fragment route by short polling. Actions are POSTs behind the
session's CSRF token, and a read-only dashboard has no action routes at all.

Over 500 lines: one short handler per page, each a call of the public API and a template; the
actions are ``_acting``'s, the listing pages ``_listing``'s, how values show ``_views``', the
security ``_security``'s.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route, Router
from starlette.staticfiles import StaticFiles

from alkstore import STATS_CAP, AsyncStore, JobPage, JobPhase, QueueStats, Store
from alkstore.errors import AlkstoreError, InvalidArgument, InvalidName, InvalidOptions, NotOffered

from ._acting import BULK_LIMIT, Acting
from ._graph import GRAPH_JOBS, read_graph
from ._guard import SECURITY_HEADERS, Guard
from ._listing import DEAD_GROUP_PAGE, DEAD_SCAN, GONE_WITHIN, WORKERS_WITHIN, Listing
from ._log import logged, read_page, role_of_request
from ._security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    READ,
    READ_TOKEN_VARIABLE,
    TOKEN_VARIABLE,
    AllowedHosts,
    LoginThrottle,
    form_token,
    new_session,
)
from ._security import allowed_hosts as _allowed_hosts
from ._settings import SETTINGS, entry_of
from ._threaded import ThreadedStore
from ._throughput import MINUTES, RANGES, Minute, chart_of, figures_of, line_of, per_minute, tasks_in
from ._trouble import is_live, troubles
from ._views import capped, instant, payload_text, span, visible_controls

__all__ = [
    "BULK_LIMIT",
    "DEAD_GROUP_PAGE",
    "DEAD_SCAN",
    "MAX_BODY",
    "PAGE_SIZE",
    "REFRESH_SECONDS",
    "WORKERS_WITHIN",
    "create_app",
]

_HERE = Path(__file__).parent
#: Jobs a queue page lists at a time; the characters of a dead-letter group's newest error shown folded
#: (the job's page has it whole).
PAGE_SIZE = 50
SAMPLE_CHARS = 5_000
#: The largest request body read (bytes): room for a bulk action's ``BULK_LIMIT`` ids of 19 digits.
MAX_BODY = 256 * 1024
#: How often a page's live fragment is asked for again (seconds); the newest dead jobs read per queue to
#: tell dead letters rising.
REFRESH_SECONDS = 2.0
DEAD_SAMPLE = 20
#: How each phase's listing is ordered (the keyset order ``AsyncStore.jobs`` pages through).
_ORDERS = {
    JobPhase.READY: "in claim order: highest priority first, then the longest waiting",
    JobPhase.DELAYED: "the soonest due first",
    JobPhase.WAITING: "the oldest job first",
    JobPhase.RUNNING: "the oldest job first",
    JobPhase.DEAD: "the newest death first",
}
#: The same orders turned round (``AsyncStore.jobs(reverse=True)``), and what the toggle to each says.
_REVERSED = {
    JobPhase.READY: "claim order turned round: lowest priority first, then the newest",
    JobPhase.DELAYED: "the latest due first",
    JobPhase.WAITING: "the newest job first",
    JobPhase.RUNNING: "the newest job first",
    JobPhase.DEAD: "the oldest death first",
}
_TOGGLES = {
    JobPhase.READY: ("Newest first", "Claim order"),
    JobPhase.DELAYED: ("Latest due first", "Soonest due first"),
    JobPhase.WAITING: ("Newest first", "Oldest first"),
    JobPhase.RUNNING: ("Newest first", "Oldest first"),
    JobPhase.DEAD: ("Oldest first", "Newest first"),
}
#: A page's headers: the security headers (which the guard also adds to every other response) and no caching.
_HEADERS = {**SECURITY_HEADERS, "Cache-Control": "no-store"}


StoreSource = AsyncStore | Store | Callable[[], Awaitable[AsyncStore]]


def _outbox_of(queue: str) -> str | None:
    """The outbox whose backing queue ``queue`` is (``QueueStats.outbox``'s rule), or ``None``."""
    return QueueStats(queue, 0, 0, 0, 0, timedelta(0), None).outbox


class _Dashboard(Listing, Acting):
    """The handlers, over one store."""

    def __init__(
        self,
        source: StoreSource,
        read_only: bool,
        title: str,
        cap: int | None,
        hosts: AllowedHosts,
        secret: bytes,
        warning: str | None,
    ) -> None:
        self._source = source
        self.warning = warning
        self.hosts = hosts
        self.secret = secret
        self.cap = cap
        self._store: AsyncStore | ThreadedStore | None = None
        if isinstance(source, AsyncStore):
            self._store = source
        elif isinstance(source, Store):
            self._store = ThreadedStore(source)
        self.read_only = read_only
        self.title = title
        self.router = Router()
        self.templates = Environment(
            loader=FileSystemLoader(_HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=visible_controls,  # every value any template shows, before it is escaped
        )
        self.templates.filters.update(capped=capped, span=span, instant=instant, payload=payload_text)

    @property
    def store(self) -> AsyncStore | ThreadedStore:
        if self._store is None:
            raise RuntimeError("the dashboard's store is not open yet (the app's lifespan opens it)")
        return self._store

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Open the store when the app was given a way to open one, and close it at shutdown."""
        if isinstance(self._source, AsyncStore | Store):
            yield
            return
        self._store = await self._source()
        try:
            yield
        finally:
            await self._store.close()
            self._store = None

    # -- rendering -------------------------------------------------------------------

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """``template`` with ``context``, the session's form token (a new session gets one) and the page's headers."""
        session = request.cookies.get(CSRF_COOKIE) or ""
        fresh = not session
        if fresh:
            session = new_session()

        def url(name: str, query: Mapping[str, Any] | None = None, **params: Any) -> str:
            path = self.path(request, name, **params)
            wanted = {key: value for key, value in (query or {}).items() if value is not None}
            return f"{path}?{urlencode(wanted)}" if wanted else path

        page = self.templates.get_template(template).render(
            title=self.title,
            read_only=self.reading(request),
            role=role_of_request(request),
            warning=self.warning,
            csrf_field=CSRF_FIELD,
            csrf_token=form_token(self.secret, session),
            url=url,
            static=lambda path: url("static", path=path),
            refresh_seconds=REFRESH_SECONDS,
            sample_chars=SAMPLE_CHARS,
            **context,
        )
        response = HTMLResponse(page, status_code=status_code, headers=_HEADERS)
        if fresh:
            secure = request.url.scheme == "https"
            response.set_cookie(CSRF_COOKIE, session, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    def reading(self, request: Request) -> bool:
        """Whether the request may only read: a read-only dashboard, or the read token's role (ADR 068)."""
        return self.read_only or role_of_request(request) == READ

    def path(self, request: Request, name: str, **params: Any) -> str:
        """The path of this dashboard's route ``name``, under wherever it is mounted (the request's root path)."""
        root: str = request.scope.get("root_path", "")
        quoted = {key: quote(value, safe="") if isinstance(value, str) else value for key, value in params.items()}
        return root + str(self.router.url_path_for(name, **quoted))

    async def overview_context(self, request: Request) -> dict[str, Any]:
        """The overview's figures; with ``?exact=1``, counts past the cap too (a count of every row: slower on a
        big table, so asked for, not polled by default)."""
        store = self.store
        at = store.clock.now()
        exact = request.query_params.get("exact") == "1"
        queues = await store.queue_stats(cap=None if exact else self.cap)
        seen = await store.workers(GONE_WITHIN)
        workers = [worker for worker in seen if is_live(worker, at)]
        recent_dead = {
            stats.queue: (await store.jobs(stats.queue, JobPhase.DEAD, limit=DEAD_SAMPLE)).jobs
            for stats in queues
            if stats.dead
        }
        schedules = await store.schedules()
        leader = await store.leader()
        running = await self._running(queues)
        found = troubles(at, queues, seen, leader, schedules, running, recent_dead, DEAD_SAMPLE)
        return {
            "at": at,
            "exact": exact,
            "capped_counts": any(
                s.cap is not None and max(s.ready, s.delayed, s.running, s.dead) >= s.cap for s in queues
            ),
            "queues": queues,
            "troubles": found,
            "troubled": {(trouble.kind, trouble.subject) for trouble in found},
            # An outbox's backing queue: how many of the workers seen deliver it (its couriers, ADR 057).
            "couriers": {s.queue: sum(s.queue in w.queues for w in workers) for s in queues if s.outbox},
            "leader": leader,
            "schedules": schedules,
            "workers": workers,
            "workers_within": WORKERS_WITHIN,
            "chart": chart_of(per_minute(await store.throughput(MINUTES + 1), at)),
        }

    # -- pages -----------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return self.render(request, "overview.html", page="overview", **await self.overview_context(request))

    async def overview_fragment(self, request: Request) -> Response:
        return self.render(request, "_overview.html", **await self.overview_context(request))

    async def queue(self, request: Request) -> Response:
        return await self._queue_page(request, request.path_params["queue"])

    async def _counts(self, name: str) -> dict[str, Any]:
        """A queue's counts (404 for a name no queue can have) and, for an outbox's backing queue, how many live
        workers deliver it (its couriers, ADR 057)."""
        try:
            stats = await self.store.queue_stats(name, cap=self.cap)
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        live = await self.store.workers(WORKERS_WITHIN) if _outbox_of(name) else None
        return {
            "stats": stats[0] if stats else None,
            "couriers": None if live is None else sum(name in w.queues for w in live),
        }

    async def queue_counts(self, request: Request) -> Response:
        """A queue's counts (an outbox's: with its couriers), the fragment its page refreshes."""
        return self.render(request, "_queue_counts.html", **await self._counts(request.path_params["queue"]))

    async def outbox(self, request: Request) -> Response:
        """An outbox's messages: its backing queue's page (ADR 057), under the outbox's name."""
        try:
            name = self.store.outbox(request.path_params["outbox"]).queue
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        return await self._queue_page(request, name)

    async def results(self, request: Request) -> Response:
        """A queue's kept results (ADR 042), newest first, a page at a time."""
        name = request.path_params["queue"]
        cursor = request.query_params.get("cursor") or None
        try:
            page = await self.store.results(name, limit=PAGE_SIZE, cursor=cursor)
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        return self.render(
            request,
            "results.html",
            page="results",
            queue=name,
            results=page.results,
            next_cursor=page.cursor,
            first_page=cursor is None,
        )

    async def find(self, request: Request) -> Response:
        """The page of the job whose id was asked for (the search box every page has)."""
        asked = request.query_params.get("id", "").strip().lstrip("#")
        if not asked.isdigit() or len(asked) > 19:
            raise HTTPException(400, f"not a job id: {asked!r} (a job id is a whole number)")
        return RedirectResponse(self.path(request, "job", job_id=int(asked)), status_code=303)

    async def _queue_page(self, request: Request, name: str, status: int = 200, **extra: Any) -> Response:
        state = request.query_params.get("state", JobPhase.READY.value)
        try:
            phase = JobPhase(state)
        except ValueError:
            raise HTTPException(404, f"no such state: {state}") from None
        cursor = request.query_params.get("cursor") or None
        reverse = request.query_params.get("order") == "reversed"
        contains_text = request.query_params.get("contains", "").strip()
        task = request.query_params.get("task", "").strip() or None
        problem = None
        try:
            contains = json.loads(contains_text) if contains_text else None
        except ValueError as exc:
            contains, problem = None, f"The payload filter is not JSON: {exc}."
        try:
            page = (
                JobPage((), None)
                if problem
                else await self.store.jobs(
                    name, phase, limit=PAGE_SIZE, cursor=cursor, contains=contains, reverse=reverse, task=task
                )
            )
        except (InvalidArgument, InvalidOptions) as exc:
            page, problem = JobPage((), None), f"{type(exc).__name__}: {exc}"
        except InvalidName as exc:
            if task is None:
                raise HTTPException(404, str(exc)) from None
            page, problem = JobPage((), None), f"The task filter is not a task name: {exc}"
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        counts = await self._counts(name)
        stats = counts["stats"]
        outbox = _outbox_of(name)
        # An outbox's backing queue is reached through its outbox alone: its settings and pause are not the page's.
        defaults = None if outbox is not None else await self.store.queue(name).defaults()
        return self.render(
            request,
            "queue.html",
            status_code=status if problem is None else 400,
            page="queue",
            queue=name,
            outbox=outbox,
            phase=phase,
            phases=list(JobPhase),
            order=(_REVERSED if reverse else _ORDERS)[phase],
            reverse=reverse,
            toggle=_TOGGLES[phase][reverse],
            jobs=page.jobs,
            next_cursor=page.cursor,
            first_page=cursor is None,
            contains=contains_text or None,
            task=task,
            filters={"contains": contains_text or None, "task": task, "order": "reversed" if reverse else None},
            problem=problem,
            **counts,
            paused=bool(stats and stats.paused),
            cancellable=not self.reading(request) and phase is not JobPhase.DEAD,
            defaults=defaults,
            settings=SETTINGS,
            entry=extra.pop("entry", None) or (entry_of(defaults) if defaults else {}),
            **extra,
            at=self.store.clock.now(),
            live=(
                {worker.id for worker in await self.store.workers(WORKERS_WITHIN)}
                if phase is JobPhase.RUNNING
                else set()
            ),
        )

    async def job(self, request: Request) -> Response:
        job_id: int = request.path_params["job_id"]
        job = await self.store.get_job(job_id)
        if job is not None:
            return self.render(request, "job.html", page="job", job=job, at=self.store.clock.now())
        kept = await self.store.result(job_id)  # done, on a queue that keeps results (ADR 042)
        if kept is not None:
            return self.render(request, "result.html", page="job", result=kept)
        return self.render(request, "missing.html", status_code=404, page="job", job_id=job_id)

    async def job_graph(self, request: Request) -> Response:
        """The graph the job belongs to (ADR 073), read through parents and children up to ``GRAPH_JOBS``."""
        job_id: int = request.path_params["job_id"]

        async def was_done(other: int) -> bool:
            return await self.store.result(other) is not None

        graph = await read_graph(self.store.get_job, was_done, job_id)
        if graph is None:
            return self.render(request, "missing.html", status_code=404, page="job", job_id=job_id)
        return self.render(request, "graph.html", page="job", graph=graph, most=GRAPH_JOBS)

    async def schedules(self, request: Request) -> Response:
        return await self._schedules_page(request)

    async def charts(self, request: Request) -> Response:
        """Runs done and failed, mean run time and mean pickup latency per point over a chosen range, of one queue
        or of all, of one task or of all (ADR 068, 075)."""
        queue = request.query_params.get("queue") or None
        task = request.query_params.get("task")  # "" is the task-less jobs' task; absent: every task
        chosen = request.query_params.get("range", "1h")
        if chosen not in RANGES:
            raise HTTPException(404, f"no such range: {chosen[:100]} (the ranges are {', '.join(RANGES)})")
        minutes, bucket = RANGES[chosen]
        now = self.store.clock.now()
        try:
            stored = await self.store.task_figures(minutes + bucket, queue)
        except InvalidName:
            raise HTTPException(400, "that is not a queue name") from None
        figures = figures_of(stored, now, minutes, bucket, queue, task)
        if task is None and bucket < 60:  # the queues' own counts, as the overview's chart draws them (ADR 048)
            counts = per_minute(await self.store.throughput(minutes + 1), now, minutes, queue, bucket)
        else:
            counts = [Minute(f.start, f.done, f.failed, f.length) for f in figures]
        end = figures[-1].start + figures[-1].length
        context: dict[str, Any] = {"queue": queue, "task": task, "ranges": RANGES, "chosen": chosen}
        context.update(minutes=minutes, bucket=bucket, chart=chart_of(counts), tasks=tasks_in(stored, queue))
        context.update(
            run_time=line_of([(f.start, f.mean_run_ms) for f in figures], end),
            latency=line_of([(f.start, f.mean_latency_ms) for f in figures], end),
        )
        return self.render(request, "charts.html", page="charts", **context)

    async def actions(self, request: Request) -> Response:  # the action log, newest first (ADR 068)
        context = await read_page(self.store, request.query_params.get("before"))
        return self.render(request, "actions.html", page="actions", **context)

    async def _schedules_page(
        self, request: Request, entry: Mapping[str, str] | None = None, problem: str | None = None
    ) -> Response:
        """The schedules, with the add form (refilled with ``entry`` and saying ``problem`` when an add was refused)."""
        if problem is not None:
            request.state.outcome = f"refused: {problem}"
        return self.render(
            request,
            "schedules.html",
            status_code=200 if problem is None else 400,
            page="schedules",
            schedules=await self.store.schedules(),
            at=self.store.clock.now(),
            entry=entry or {},
            problem=problem,
        )

    async def error(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, NotOffered):  # an engine without the operations port: nothing here to show
            return self.render(request, "error.html", status_code=501, page="error", status=501, detail=str(exc))
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404 and request.method in {"GET", "HEAD"}:
            twin = self._slash_twin(request)
            if twin is not None:
                return RedirectResponse(twin, status_code=307)
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return self.render(request, "error.html", status_code=status, page="error", status=status, detail=detail)

    def _slash_twin(self, request: Request) -> str | None:
        """For a path no route answers, the path (and query) one does once a trailing slash is added or
        dropped, relative (no scheme or host: nothing a request's ``Host`` says goes into it), or ``None``."""
        path: str = request.scope["path"]
        if path in {"", "/"} or path == request.scope.get("root_path", "") + "/":
            return None
        twin = path.rstrip("/") if path.endswith("/") else path + "/"

        def routed(candidate: str) -> bool:
            scope = {**request.scope, "path": candidate}
            return any(route.matches(scope)[0] is not Match.NONE for route in self.router.routes)

        if routed(path) or not routed(twin):  # a handler's own 404, or no route either way
            return None
        raw: bytes = request.scope.get("raw_path") or quote(path).encode()
        location = raw.decode("latin-1")
        location = location.rstrip("/") if location.endswith("/") else location + "/"
        query = request.scope.get("query_string", b"").decode("latin-1")
        return f"{location}?{query}" if query else location

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/", self.overview, name="overview"),
            Route("/fragments/overview", self.overview_fragment, name="overview_fragment"),
            Route("/fragments/counts/{queue:path}", self.queue_counts, name="queue_counts"),
            Route("/queues/{queue:path}", self.queue, name="queue"),
            Route("/outboxes/{outbox:path}", self.outbox, name="outbox"),
            Route("/results/{queue:path}", self.results, name="results"),
            Route("/find", self.find, name="find"),
            Route("/jobs/{job_id:int}", self.job, name="job"),
            Route("/jobs/{job_id:int}/graph", self.job_graph, name="job_graph"),
            Route("/fragments/dead", self.dead_fragment, name="dead_fragment"),
            Route("/fragments/workers", self.workers_fragment, name="workers_fragment"),
            Route("/fragments/locks", self.locks_fragment, name="locks_fragment"),
            Route("/dead", self.dead, name="dead"),
            Route("/dead/group", self.dead_group, name="dead_group"),
            Route("/schedules", self.schedules, name="schedules"),
            Route("/workers", self.workers, name="workers"),
            Route("/locks", self.locks, name="locks"),
            Route("/actions", self.actions, name="actions"),
            Route("/charts", self.charts, name="charts"),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ]
        if not self.read_only:
            routes.append(Route("/done", self.done, name="done"))
            routes.append(Route("/progress", self.bulk_progress, name="bulk_progress"))
            acts: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
                ("/jobs/{job_id:int}/requeue", self.requeue_job, "requeue_job"),
                ("/actions/requeue-dead/{queue:path}", self.requeue_queue, "requeue_queue"),
                ("/actions/purge-dead/{queue:path}", self.purge_queue, "purge_queue"),
                ("/actions/dead", self.dead_bulk, "dead_bulk"),
                ("/actions/dead-group", self.dead_group_bulk, "dead_group_bulk"),
                ("/actions/filter", self.filter_bulk, "filter_bulk"),
                ("/actions/pause/{queue:path}", self.pause_queue, "pause_queue"),
                ("/actions/resume/{queue:path}", self.resume_queue, "resume_queue"),
                ("/actions/settings/{queue:path}", self.configure_queue, "configure_queue"),
                ("/jobs/{job_id:int}/cancel", self.cancel_job, "cancel_job"),
                ("/jobs/{job_id:int}/skip-step", self.skip_step, "skip_step"),
                ("/actions/schedules", self.add_schedule, "add_schedule"),
                ("/actions/unschedule/{schedule:path}", self.remove_schedule, "remove_schedule"),
                ("/actions/fire/{schedule:path}", self.fire_schedule, "fire_schedule"),
            ]
            for path, handler, name in acts:  # every action logged (ADR 068)
                routes.append(Route(path, logged(lambda: self.store, name, handler), methods=["POST"], name=name))
        return routes


def create_app(
    store: StoreSource,
    *,
    read_only: bool = False,
    token: str | None = None,
    read_token: str | None = None,
    title: str = "alkstore",
    cap: int | None = STATS_CAP,
    allowed_hosts: Iterable[str] | AllowedHosts | None = None,
    secret: str | bytes | None = None,
    warning: str | None = None,
) -> Starlette:
    """The dashboard over ``store``, an ASGI app to serve or mount in a service.

    ``store`` is an open ``AsyncStore`` or sync ``Store`` (the caller closes it; a sync store's calls
    run on worker threads), or an async callable opening an ``AsyncStore``,
    which the app's lifespan calls at startup and whose store it closes at shutdown (a mounted
    app's lifespan does not run: mount one over an open store). With
    ``read_only`` no action is reachable: their routes are absent and no page shows a button.
    With ``token`` (default: ``$ALKSTORE_WEB_TOKEN``, if set) every request must present it, as
    basic auth's password or a bearer token; with ``read_token`` too (default:
    ``$ALKSTORE_WEB_READ_TOKEN``) a request presenting it reads every page and may not act (403).
    Every action is logged in the store (``AsyncStore.actions``; the Actions page). Queue counts
    stop at ``cap`` as ``alkstore status``'s do (``10,000+``): the overview's polling stays cheap.

    A request whose ``Host`` is not an allowed host is refused (400) before anything else, so a
    page whose name was re-pointed at this machine reads nothing (DNS rebinding): the loopback
    names are allowed on any port, and ``allowed_hosts`` adds the names (``name`` or
    ``name:port``) the dashboard is reached under, e.g. a proxy's in front of it. An action must
    come from the request's own origin or an ``allowed_hosts`` name's, and carry its session's
    form token, signed with ``secret`` (default: random for this app; give each process serving
    one dashboard the same). A ``warning`` shows at the top of every page (``alkstore web`` says
    there when anyone who can connect may act).
    """
    hosts = allowed_hosts if isinstance(allowed_hosts, AllowedHosts) else _allowed_hosts(configured=allowed_hosts or ())
    key = secrets.token_bytes(32) if secret is None else secret.encode() if isinstance(secret, str) else secret
    if not key:
        raise InvalidOptions("an empty secret signs nothing: leave it out for a random one")
    dashboard = _Dashboard(store, read_only, title, cap, hosts, key, warning)
    secret = token if token is not None else os.environ.get(TOKEN_VARIABLE) or None
    reader = read_token if read_token is not None else os.environ.get(READ_TOKEN_VARIABLE) or None
    if reader is not None and (secret is None or reader == secret):
        raise InvalidOptions("a read-only token goes beside a full token, and differs from it")
    app = Starlette(
        routes=dashboard.routes(),
        lifespan=dashboard.lifespan,
        exception_handlers={HTTPException: dashboard.error, NotOffered: dashboard.error, Exception: dashboard.error},
    )
    throttle = LoginThrottle(lambda: dashboard.store.clock.now().timestamp())
    app.add_middleware(Guard, hosts=hosts, token=secret, max_body=MAX_BODY, throttle=throttle, read_token=reader)
    app.state.allowed_hosts = hosts
    app.router.redirect_slashes = False  # its redirect is absolute, built from the Host header: ours is relative
    dashboard.router = app.router
    app.state.dashboard = dashboard
    return app
