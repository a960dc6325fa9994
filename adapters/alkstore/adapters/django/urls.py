"""The admin pages' URLs (``.admin``), namespaced ``alkstore``; include them before the admin's."""

from __future__ import annotations

from django.urls import path

from . import admin

app_name = "alkstore"

urlpatterns = [
    path("", admin.index, name="index"),
    path("<str:alias>/jobs/", admin.jobs, name="jobs"),
    path("<str:alias>/jobs/<int:job_id>/", admin.job, name="job"),
    path("<str:alias>/jobs/<int:job_id>/requeue/", admin.requeue, name="requeue"),
    path("<str:alias>/jobs/<int:job_id>/cancel/", admin.cancel, name="cancel"),
]
