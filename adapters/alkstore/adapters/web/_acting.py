"""The dashboard's actions (ADR 043, 060, 068): POSTs behind the origin check and the session's form token.

``Acting`` is a part of the dashboard (``_app._Dashboard`` inherits it): each handler reads its form
through ``_form`` (403 before anything is read from the store unless the form passed), calls the
public API and answers with post/redirect/get (``_done``), which also gives the action log its
outcome (``_log``). A read-only dashboard has none of these routes; a reader's POST never gets here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from alkstore import AsyncStore, CancelOutcome, JobState
from alkstore.errors import AlkstoreError, InvalidArgument, InvalidOptions, JobHeld, UnknownJob

from ._bulk import CHUNK, COUNT_SCAN, VERBS, Run, run_of, signature
from ._security import CSRF_COOKIE, CSRF_FIELD, AllowedHosts, valid_form_token
from ._settings import SETTINGS, said, settings_of
from ._threaded import ThreadedStore
from ._views import instant

__all__ = ["BULK_LIMIT", "Acting"]

#: The most job ids one bulk action takes (a page's selection is far fewer).
BULK_LIMIT = 10_000
#: What a cancel's outcome tells the operator (ADR 035: a running job is asked to stop, not killed).
_CANCELLED = {
    CancelOutcome.CANCELLED: "Job {job_id} was waiting to run: it is cancelled and deleted.",
    CancelOutcome.CANCELLING: "Job {job_id} is running: cancelling. Its worker was asked to stop it and it ends "
    "cancelled, within seconds (or once its lease lapses, if its worker is gone).",
    CancelOutcome.DEAD: "Job {job_id} is dead: nothing to cancel (requeue or purge it instead).",
    CancelOutcome.MISSING: "Job {job_id} is gone (done, cancelled or purged): nothing to cancel.",
}
#: The bulk actions on dead jobs, and the word a message says each did with.
_BULK = {"requeue": "Requeued", "purge": "Purged"}


class Acting:
    """The dashboard's action handlers; ``_app._Dashboard`` inherits them and has what they use."""

    if TYPE_CHECKING:
        hosts: AllowedHosts
        secret: bytes

        @property
        def store(self) -> AsyncStore | ThreadedStore: ...

        def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse: ...

        def path(self, request: Request, name: str, **params: Any) -> str: ...

        def reading(self, request: Request) -> bool: ...

        async def _queue_page(self, request: Request, name: str, status: int = 200, **extra: Any) -> Response: ...

        async def _schedules_page(
            self, request: Request, entry: dict[str, str] | None = None, problem: str | None = None
        ) -> Response: ...

    async def _fields(self, request: Request) -> dict[str, list[str]]:
        """The POSTed form, every value of each field, once it came from one of the dashboard's own origins
        and its form token is the session's (403 otherwise: nothing is read from the store)."""
        origin = request.headers.get("origin")
        if origin is None:  # an older browser's POST, or a script's: its Referer must say where from
            origin = request.headers.get("referer")
        if not self.hosts.allows_origin(origin, request.headers.get("host"), request.url.scheme):
            raise HTTPException(
                403, f"refused: this action comes from {origin or 'no stated origin'}, not from this dashboard's pages"
            )
        body = (await request.body()).decode("utf-8", "replace")
        fields = parse_qs(body, keep_blank_values=True)
        sent = fields.get(CSRF_FIELD)
        if not valid_form_token(self.secret, request.cookies.get(CSRF_COOKIE), sent[0] if sent else None):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")
        if self.reading(request):  # the guard refused it already; a handler never acts for a reader
            raise HTTPException(403, "refused: this dashboard only reads")
        request.state.checked = True  # from here on the action is logged, whatever comes of it
        return fields

    async def _form(self, request: Request) -> dict[str, str]:
        """The POSTed form's first value of each field, once its CSRF token is the session's (403 otherwise)."""
        return {key: values[0] for key, values in (await self._fields(request)).items()}

    def _done(self, request: Request, message: str, back: str) -> Response:
        """Post/redirect/get: send the browser on (303) to a page saying ``message``, so reloading it
        repeats nothing. The message and the way back travel in its query, signed by the dashboard."""
        request.state.outcome = message
        query = urlencode({"message": message, "back": back, "sig": self._signature(message, back)})
        return RedirectResponse(f"{self.path(request, 'done')}?{query}", status_code=303)

    def _signature(self, message: str, back: str) -> str:
        """The dashboard's signature of a done page's ``message`` and ``back``: no other site can have the
        dashboard say something it did not, under its own name."""
        signed = hmac.new(self.secret, f"alkstore-done\x00{message}\x00{back}".encode(), hashlib.sha256)
        return signed.hexdigest()

    async def done(self, request: Request) -> Response:
        """What an action did, as its redirect says (400 for a message the dashboard did not sign)."""
        message = request.query_params.get("message", "")
        back = request.query_params.get("back", "")
        if not hmac.compare_digest(request.query_params.get("sig", ""), self._signature(message, back)):
            raise HTTPException(400, "not a message of this dashboard's")
        return self.render(request, "done.html", page="done", message=message, back=back)

    def _back_to_job(self, request: Request, form: dict[str, str], job_id: int) -> str:
        """Where a job's action leads back to: the graph page it was taken from (its ``graph`` field, a
        job id), else the job's page."""
        root = form.get("graph", "")
        if root.isascii() and root.isdigit() and len(root) <= 19:
            return self.path(request, "job_graph", job_id=int(root))
        return self.path(request, "job", job_id=job_id)

    async def requeue_job(self, request: Request) -> Response:
        form = await self._form(request)
        job_id: int = request.path_params["job_id"]
        requeued = await self.store.requeue_dead(job_id)
        message = f"Job {job_id} is back on its queue." if requeued else f"Job {job_id} is not dead; nothing done."
        return self._done(request, message, self._back_to_job(request, form, job_id))

    async def requeue_queue(self, request: Request) -> Response:
        await self._form(request)
        name = request.path_params["queue"]
        try:
            count = await self.store.requeue_dead_queue(name)
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        return self._done(request, f"Requeued {count} dead jobs of {name}.", self.path(request, "dead"))

    async def purge_queue(self, request: Request) -> Response:
        await self._form(request)
        name = request.path_params["queue"]
        try:
            count = await self.store.purge_dead(name)
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        return self._done(request, f"Purged {count} dead jobs of {name}.", self.path(request, "dead"))

    async def pause_queue(self, request: Request) -> Response:
        return await self._pause(request, paused=True)

    async def resume_queue(self, request: Request) -> Response:
        return await self._pause(request, paused=False)

    async def _pause(self, request: Request, paused: bool) -> Response:
        """Pause or resume the queue the path names (ADR 033), and say so."""
        await self._form(request)
        name = request.path_params["queue"]
        try:  # a name no queue may have is refused by ``queue`` itself
            queue = self.store.queue(name)
            await (queue.pause() if paused else queue.resume())
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        if paused:
            message = f"Paused {name}: workers stop claiming its jobs within seconds; running jobs finish."
        else:
            message = f"Resumed {name}: workers claim its jobs again within seconds."
        return self._done(request, message, self.path(request, "queue", queue=name))

    async def configure_queue(self, request: Request) -> Response:
        """Store the queue's settings from its page's form, as ``Queue.configure`` checks them (nothing written
        on a refusal: the page comes back with the form as sent and the error named)."""
        form = await self._form(request)
        name = request.path_params["queue"]
        try:
            queue = self.store.queue(name)  # a name no queue may have (an outbox's backing queue too) is 404
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        try:
            defaults = await queue.configure(**settings_of(form))
        except (InvalidOptions, InvalidArgument) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            request.state.outcome = f"refused: {problem}"
            entry = {key: form.get(key, "") for key, _, _ in SETTINGS}
            return await self._queue_page(request, name, 400, entry=entry, settings_problem=problem)
        message = f"Saved the settings of {name}: {said(defaults)}."
        return self._done(request, message, self.path(request, "queue", queue=name))

    async def cancel_job(self, request: Request) -> Response:
        form = await self._form(request)
        job_id: int = request.path_params["job_id"]
        outcome = await self.store.cancel(job_id)
        message = _CANCELLED[outcome].format(job_id=job_id)
        return self._done(request, message, self._back_to_job(request, form, job_id))

    async def skip_step(self, request: Request) -> Response:
        """Store a step of a job nobody holds as finished with the form's JSON result (ADR 077); a refusal
        (bad name or JSON, a running job) brings the job's page back with the form as sent and why."""
        form = await self._form(request)
        job_id: int = request.path_params["job_id"]
        entry = {"name": form.get("name", "").strip(), "result": form.get("result", "").strip() or "null"}
        request.state.target = f"job {job_id}, step {entry['name']}"
        try:
            state = await self.store.skip_step(job_id, entry["name"], json.loads(entry["result"]))
        except UnknownJob:
            return self.render(request, "missing.html", status_code=404, page="job", job_id=job_id)
        except ValueError as exc:  # not JSON, a bad name, a result the codec refuses
            said = str(exc) if isinstance(exc, AlkstoreError) else f"the result is not JSON: {exc}"
            return await self._skip_refused(request, job_id, entry, 400, said)
        except JobHeld as exc:
            return await self._skip_refused(request, job_id, entry, 409, str(exc))
        then = "once it is requeued, its run" if state is JobState.DEAD else "its next run"
        message = f"Job {job_id}: step {entry['name']} stored as finished; {then} gets its result without running it."
        return self._done(request, message, self.path(request, "job", job_id=job_id))

    async def _skip_refused(
        self, request: Request, job_id: int, entry: dict[str, str], status: int, problem: str
    ) -> Response:
        request.state.outcome = f"refused: {problem}"
        job = await self.store.get_job(job_id)
        if job is None:
            return self.render(request, "missing.html", status_code=404, page="job", job_id=job_id)
        context = {
            "job": job,
            "at": self.store.clock.now(),
            "skip_entry": entry,
            "skip_problem": f"Not skipped: {problem}",
        }
        return self.render(request, "job.html", status, page="job", **context)

    async def add_schedule(self, request: Request) -> Response:
        form = await self._form(request)
        entry = {key: form.get(key, "").strip() for key in ("name", "spec", "queue", "payload")}
        request.state.target = f"schedule {entry['name']}"
        try:
            payload = json.loads(entry["payload"]) if entry["payload"] else None
        except ValueError as exc:
            return await self._schedules_page(request, entry, f"The payload is not JSON: {exc}.")
        if any(schedule.name == entry["name"] for schedule in await self.store.schedules()):
            return await self._schedules_page(request, entry, f"A schedule named {entry['name']!r} exists already.")
        try:
            schedule = await self.store.schedule(entry["name"], entry["spec"], entry["queue"], payload)
        except AlkstoreError as exc:
            return await self._schedules_page(request, entry, f"{type(exc).__name__}: {exc}")
        first = instant(schedule.next_boundary)
        message = f"Added schedule {schedule.name}: {schedule.spec} onto {schedule.queue}, first at {first}."
        return self._done(request, message, self.path(request, "schedules"))

    async def remove_schedule(self, request: Request) -> Response:
        await self._form(request)
        name = request.path_params["schedule"]
        try:
            removed = await self.store.unschedule(name)
        except AlkstoreError as exc:
            raise HTTPException(404, str(exc)) from None
        message = f"Removed schedule {name}; jobs it fired stay." if removed else f"No schedule {name}; nothing done."
        return self._done(request, message, self.path(request, "schedules"))

    async def fire_schedule(self, request: Request) -> Response:
        await self._form(request)
        name = request.path_params["schedule"]
        schedule = next((s for s in await self.store.schedules() if s.name == name), None)
        job_id = None if schedule is None else await self.store.fire_now(name)
        if schedule is None or job_id is None:
            return self._done(request, f"No schedule {name}; nothing done.", self.path(request, "schedules"))
        next_at = instant(schedule.next_boundary)
        task = f" (task {schedule.task})" if schedule.task else ""
        message = f"Fired {name} now: job {job_id}{task} on {schedule.queue}. Its next boundary stays {next_at}."
        return self._done(request, message, self.path(request, "job", job_id=job_id))

    async def dead_bulk(self, request: Request) -> Response:
        """Requeue or purge the chosen dead jobs, after a page that asks to confirm (with or without JavaScript)."""
        fields = await self._fields(request)
        action = (fields.get("action") or [""])[0]
        if action not in _BULK:
            raise HTTPException(400, f"no such bulk action: {action}")
        try:
            ids = sorted({int(value) for value in fields.get("id", [])})
        except ValueError:
            raise HTTPException(400, "a job id is not a number") from None
        request.state.target = f"{action} of {len(ids)} chosen: " + " ".join(map(str, ids))
        if not ids:
            return self._done(request, "No dead job was chosen; nothing done.", self.path(request, "dead"))
        if len(ids) > BULK_LIMIT:
            raise HTTPException(400, f"at most {BULK_LIMIT:,} jobs at once")
        if (fields.get("confirmed") or [""])[0] != "yes":
            return self.render(
                request, "confirm.html", page="dead", action=action, ids=ids, what=(fields.get("what") or [""])[0]
            )
        if action == "requeue":
            count = len(await self.store.requeue_dead_many(ids))
        else:
            count = len(await self.store.purge_dead_many(ids))
        message = f"{_BULK[action]} {count} jobs" + (
            "." if count == len(ids) else f" ({len(ids) - count} of those chosen were no longer dead)."
        )
        return self._done(request, message, self.path(request, "dead"))

    async def dead_group_bulk(self, request: Request) -> Response:
        """Requeue or purge every dead job of a group (the dead-letters page's group buttons): the bulk run over
        the group's filter (``filter_bulk``), so a group of 100,000 is asked about, then done ``CHUNK`` a request."""
        form = await self._form(request)
        if not form.get("key"):
            raise HTTPException(400, "no error group named")
        fields = {"action": form.get("action", ""), "queue": form.get("queue", ""), "state": "dead"}
        fields.update(group=form.get("key", ""), confirmed=form.get("confirmed", ""))
        return await self._bulk(request, fields)

    async def filter_bulk(self, request: Request) -> Response:
        """Requeue, purge or cancel every job matching a filter (ADR 068): first a page saying how many, then,
        confirmed, ``CHUNK`` jobs a request, its progress said between chunks (post/redirect/get)."""
        return await self._bulk(request, await self._form(request))

    async def _bulk(self, request: Request, form: dict[str, str]) -> Response:
        """A bulk run's next step, from a form that passed: its confirmation, or its next chunk and where it is."""
        try:
            run = run_of(form)
        except InvalidOptions as exc:
            raise HTTPException(400, str(exc)) from None
        request.state.target = run.said()
        back = self.path(request, "queue", queue=run.queue) + "?" + urlencode({"state": run.state.value})
        try:
            if form.get("confirmed") != "yes":
                total, more = await self._matching(run)
                fields = replace(run, cursor=None, done=0, total=total).fields()
                context: dict[str, Any] = {
                    "run": run,
                    "total": total,
                    "more": more,
                    "fields": fields,
                    "back": back,
                    "chunk": CHUNK,
                }
                return self.render(request, "confirm_filter.html", page="queue", **context)
            if not form.get("total"):  # confirmed without the asking page's count (a direct POST): count now
                run = replace(run, total=run.done + (await self._matching(run))[0])
            run = await self._chunk(run)
        except (AlkstoreError, ValueError) as exc:
            raise HTTPException(404, str(exc)) from None
        if run.cursor is None:
            return self._done(request, f"{VERBS[run.action]} {run.done:,} {run.said()}.", back)
        request.state.outcome = f"{VERBS[run.action]} {run.done:,} of about {run.total:,} {run.said()} so far"
        query = urlencode({**run.fields(), "sig": signature(self.secret, run)})
        return RedirectResponse(f"{self.path(request, 'bulk_progress')}?{query}", status_code=303)

    async def bulk_progress(self, request: Request) -> Response:
        """How far a bulk action has come, and the form that goes on with it (400 for a run not signed here)."""
        query = dict(request.query_params)
        try:
            run = run_of(query)
        except InvalidOptions as exc:
            raise HTTPException(400, str(exc)) from None
        if not hmac.compare_digest(query.get("sig", ""), signature(self.secret, run)):
            raise HTTPException(400, "not a run of this dashboard's")
        back = self.path(request, "queue", queue=run.queue) + "?" + urlencode({"state": run.state.value})
        context: dict[str, Any] = {
            "run": run,
            "verb": VERBS[run.action],
            "fields": run.fields(),
            "back": back,
            "chunk": CHUNK,
        }
        return self.render(request, "progress.html", page="queue", **context)

    async def _matching(self, run: Run) -> tuple[int, bool]:
        """How many jobs match ``run``'s filter, and whether counting stopped at ``COUNT_SCAN``: the queue's
        exact count of the state without a task, payload or group filter, else counted one by one."""
        if run.task is None and run.contains is None and run.group is None:
            stats = await self.store.queue_stats(run.queue, cap=None)
            return (getattr(stats[0], run.state.value) if stats else 0), False
        counted, read, cursor = 0, 0, None
        while read < COUNT_SCAN:
            page = await self.store.jobs(
                run.queue, run.state, limit=CHUNK, cursor=cursor, contains=run.probe, task=run.task
            )
            counted += sum(run.matches(job) for job in page.jobs)
            read += len(page.jobs)
            cursor = page.cursor
            if cursor is None:
                return counted, False
        return counted, True

    async def _chunk(self, run: Run) -> Run:
        """``run`` after acting on the matching jobs among the next ``CHUNK`` of its listing; its cursor ``None``
        once the listing is done."""
        read, acted, cursor = 0, 0, run.cursor
        while read < CHUNK:
            page = await self.store.jobs(
                run.queue, run.state, limit=CHUNK - read, cursor=cursor, contains=run.probe, task=run.task
            )
            ids = [job.id for job in page.jobs if run.matches(job)]
            if ids and run.action == "requeue":
                acted += len(await self.store.requeue_dead_many(ids))
            elif ids and run.action == "purge":
                acted += len(await self.store.purge_dead_many(ids))
            for job_id in ids if run.action == "cancel" else ():
                acted += await self.store.cancel(job_id) in (CancelOutcome.CANCELLED, CancelOutcome.CANCELLING)
            read += len(page.jobs)
            cursor = page.cursor
            if cursor is None:
                break
        return replace(run, cursor=cursor, done=run.done + acted)
