"""alkstore's jobs, dead jobs and schedules in Django's admin: read-only pages with requeue and cancel (ADR 045).

Custom admin views over alkstore's inspection API (``queue_stats``, ``jobs``, ``get_job``,
``schedules``, ``leader``, ``workers``): no Django model maps alkstore's tables, which keep their
own schema and versioning (ADR 010). The two actions call the public operations, each fenced
by alkstore itself: ``requeue_dead`` (a dead job back with 0 attempts) and ``cancel`` (a pending
job deleted, a running one asked to stop, ADR 035). Include the URLs before the admin's own::

    urlpatterns = [
        path("admin/alkstore/", include("alkstore.adapters.django.urls")),
        path("admin/", admin.site.urls),
    ]

Every page is the admin site's (``admin.site.admin_view``): an active staff user, else the
admin's login. An action also needs a superuser (staff without it get 403): alkstore's tables
have no model, so Django's per-model permissions cannot grant it to anyone else.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.tasks import task_backends
from django.urls import reverse
from django.views.decorators.http import require_POST

from alkstore import AlkstoreError, CancelOutcome, JobPhase, JobState

from .backend import AlkstoreBackend

__all__ = ["cancel", "index", "job", "jobs", "requeue"]

#: Jobs on one page of a listing.
PAGE = 50

#: What a cancel did, as the admin says it.
_CANCELLED = {
    CancelOutcome.CANCELLED: "job {id} was cancelled",
    CancelOutcome.CANCELLING: "job {id} is running: its worker was asked to stop it",
    CancelOutcome.DEAD: "job {id} is dead: requeue it instead",
    CancelOutcome.MISSING: "job {id} is gone (done, or cancelled already)",
}


def _backends() -> dict[str, AlkstoreBackend]:
    """The alkstore backends of ``TASKS``, by alias."""
    found = {alias: task_backends[alias] for alias in getattr(settings, "TASKS", {})}
    return {alias: backend for alias, backend in found.items() if isinstance(backend, AlkstoreBackend)}


def _backend(alias: str) -> AlkstoreBackend:
    backend = _backends().get(alias)
    if backend is None:
        raise Http404(f"no alkstore task backend {alias!r}")
    return backend


def _page(request: HttpRequest, template: str, title: str, **context: Any) -> HttpResponse:
    """An admin page: the site's header, breadcrumbs and user links around ``context``."""
    return render(
        request, f"alkstore/admin/{template}", {**admin.site.each_context(request), "title": title, **context}
    )


def _index(request: HttpRequest) -> HttpResponse:
    """Every alkstore backend: its queues' counts, the scheduler's leader and schedules, the live workers."""
    sections = []
    for alias, backend in _backends().items():
        store = backend.store
        sections.append(
            {
                "alias": alias,
                "schema": backend.schema,
                "queues": [(stats, f"{stats.lag.total_seconds():.1f} s") for stats in store.queue_stats()],
                "schedules": store.schedules(),
                "leader": store.leader(),
                "workers": store.workers(),
            }
        )
    return _page(request, "index.html", "alkstore", sections=sections, phases=list(JobPhase))


def _jobs(request: HttpRequest, alias: str) -> HttpResponse:
    """A page of one queue's jobs in one phase (``?queue=…&phase=…&cursor=…``), as claims or deaths order them."""
    backend = _backend(alias)
    queue = request.GET.get("queue", "")
    try:
        phase = JobPhase(request.GET.get("phase", JobPhase.READY))
        page = backend.store.jobs(queue, phase, limit=PAGE, cursor=request.GET.get("cursor") or None)
    except (ValueError, AlkstoreError) as exc:
        raise Http404(str(exc)) from exc
    title = f"{phase} jobs of {queue!r}"
    return _page(request, "jobs.html", title, alias=alias, queue=queue, phase=phase, page=page)


def _job(request: HttpRequest, alias: str, job_id: int) -> HttpResponse:
    """One job as alkstore keeps it, with the actions its state allows."""
    info = _backend(alias).store.get_job(job_id)
    if info is None:
        raise Http404(f"job {job_id} is not stored (done and gone, cancelled, or never a job)")
    return _page(
        request,
        "job.html",
        f"job {job_id}",
        alias=alias,
        job=info,
        payload=json.dumps(info.payload, indent=2, ensure_ascii=False, default=repr),
        can_requeue=info.state is JobState.DEAD,
        can_cancel=info.state is not JobState.DEAD and not info.cancel_requested,
    )


def _act(request: HttpRequest, alias: str, job_id: int, requeueing: bool) -> HttpResponse:
    """Requeue or cancel the job through alkstore's public API, then show it (or the index, if it is gone)."""
    if not request.user.is_superuser:
        raise PermissionDenied("only a superuser may requeue or cancel alkstore jobs")
    store = _backend(alias).store
    if requeueing:
        done = store.requeue_dead(job_id)
        text = f"job {job_id} is back on its queue" if done else f"job {job_id} is not dead: nothing to requeue"
        messages.add_message(request, messages.SUCCESS if done else messages.WARNING, text)
    else:
        outcome = store.cancel(job_id)
        level = messages.SUCCESS if outcome in (CancelOutcome.CANCELLED, CancelOutcome.CANCELLING) else messages.WARNING
        messages.add_message(request, level, _CANCELLED[outcome].format(id=job_id))
    if store.get_job(job_id) is None:
        return HttpResponseRedirect(reverse("alkstore:index"))
    return HttpResponseRedirect(reverse("alkstore:job", args=(alias, job_id)))


def _requeue(request: HttpRequest, alias: str, job_id: int) -> HttpResponse:
    return _act(request, alias, job_id, requeueing=True)


def _cancel(request: HttpRequest, alias: str, job_id: int) -> HttpResponse:
    return _act(request, alias, job_id, requeueing=False)


index = admin.site.admin_view(_index)
jobs = admin.site.admin_view(_jobs)
job = admin.site.admin_view(_job)
requeue = admin.site.admin_view(require_POST(_requeue))
cancel = admin.site.admin_view(require_POST(_cancel))
