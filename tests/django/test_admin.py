"""alkstore's pages in Django's admin, through Django's test client: staff read, superusers act, others are refused."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.tasks import task_backends
from django.test import Client

from alkstore import EnqueueOpts, JobState
from tests.django.project.shop.tasks import write

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

INDEX = "/admin/alkstore/"


def store() -> Any:
    return task_backends["default"].store


def client_of(*, staff: bool, superuser: bool = False) -> Client:
    """A test client logged in as a new user, staff or not."""
    user = User.objects.create_user(f"user-{uuid.uuid4().hex[:12]}", is_staff=staff)
    user.is_superuser = superuser
    user.save()
    client = Client()
    client.force_login(user)
    return client


def dead_job() -> int:
    """A job that died (one attempt, failed), on a queue of its own."""
    queue = store().queue(f"admin-{uuid.uuid4().hex[:8]}")
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(max_attempts=1))
    (job,) = queue.claim_many("admin-test", 1)
    job.fail("it broke")
    assert store().get_job(job_id).state is JobState.DEAD
    return int(job_id)


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def test_a_staff_user_sees_the_queues_the_schedules_and_a_queues_jobs(tmp_path: Path) -> None:
    client = client_of(staff=True)
    result = write.enqueue(path=str(tmp_path / "out"), text="x")
    index = page(client, INDEX)
    assert "Backend default" in index
    assert ">default<" in index
    assert " s</td>" in index  # the lag, in seconds
    listing = page(client, "/admin/alkstore/default/jobs/?queue=default&phase=ready")
    assert f'/admin/alkstore/default/jobs/{result.id}/"' in listing
    detail = page(client, f"/admin/alkstore/default/jobs/{result.id}/")
    assert "tests.django.project.shop.tasks.write" in detail
    assert "&quot;kwargs&quot;: {" in detail  # the payload as JSON, escaped
    assert "Cancel" in detail


def test_the_index_lists_the_registered_schedules() -> None:
    store().schedule("admin-test-schedule", "@every 1h", "default", {"args": [], "kwargs": {}})
    assert "admin-test-schedule" in page(client_of(staff=True), INDEX)


def test_a_dead_job_is_listed_and_a_superuser_requeues_it() -> None:
    job_id = dead_job()
    queue = store().get_job(job_id).queue
    client = client_of(staff=True, superuser=True)
    assert f"/jobs/{job_id}/" in page(client, f"/admin/alkstore/default/jobs/?queue={queue}&phase=dead")
    detail = page(client, f"/admin/alkstore/default/jobs/{job_id}/")
    assert "it broke" in detail
    assert "Requeue" in detail
    response = client.post(f"/admin/alkstore/default/jobs/{job_id}/requeue/", follow=True)
    assert response.status_code == 200
    assert "is back on its queue" in response.content.decode()
    info = store().get_job(job_id)
    assert (info.state, info.attempts) == (JobState.PENDING, 0)


def test_a_superuser_cancels_a_pending_job(tmp_path: Path) -> None:
    result = write.enqueue(path=str(tmp_path / "out"), text="x")
    response = client_of(staff=True, superuser=True).post(f"/admin/alkstore/default/jobs/{result.id}/cancel/")
    assert response.status_code == 302
    assert store().get_job(int(result.id)) is None


def test_cancelling_a_running_job_asks_its_worker_to_stop_it() -> None:
    queue = store().queue(f"admin-{uuid.uuid4().hex[:8]}")
    job_id = queue.enqueue({"n": 1})
    (running,) = queue.claim_many("admin-test", 1)
    client = client_of(staff=True, superuser=True)
    response = client.post(f"/admin/alkstore/default/jobs/{job_id}/cancel/", follow=True)
    assert "its worker was asked to stop it" in response.content.decode()
    assert store().get_job(int(job_id)).cancel_requested
    running.ack()


@pytest.mark.parametrize(("staff", "refused_with"), [(True, 403), (False, 302)])
def test_only_a_superuser_may_cancel_or_requeue(tmp_path: Path, staff: bool, refused_with: int) -> None:
    """A staff user who is no superuser may look but not act (403); one who is not staff goes to the login."""
    result = write.enqueue(path=str(tmp_path / "out"), text="x")
    job_id = dead_job()
    client = client_of(staff=staff)
    assert client.post(f"/admin/alkstore/default/jobs/{result.id}/cancel/").status_code == refused_with
    assert client.post(f"/admin/alkstore/default/jobs/{job_id}/requeue/").status_code == refused_with
    assert store().get_job(int(result.id)).state is JobState.PENDING
    assert store().get_job(job_id).state is JobState.DEAD


@pytest.mark.parametrize(
    "url", [INDEX, "/admin/alkstore/default/jobs/?queue=default", "/admin/alkstore/default/jobs/1/"]
)
def test_a_user_who_is_not_staff_is_sent_to_the_admin_login(url: str) -> None:
    for client in (client_of(staff=False), Client()):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_the_actions_answer_post_only_and_an_unknown_job_or_backend_is_not_found() -> None:
    client = client_of(staff=True, superuser=True)
    assert client.get(f"/admin/alkstore/default/jobs/{dead_job()}/requeue/").status_code == 405
    assert client.get("/admin/alkstore/default/jobs/999999999999/").status_code == 404
    assert client.get("/admin/alkstore/elsewhere/jobs/?queue=default").status_code == 404
    assert client.get("/admin/alkstore/default/jobs/?queue=default&phase=sideways").status_code == 404
