"""Requeue and purge: POSTs behind the session's CSRF token, absent from a read-only dashboard."""

from __future__ import annotations

import base64
import html
import re
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from alkstore import JobPhase, JobState
from alkstore.adapters.web import CSRF_COOKIE, CSRF_FIELD
from tests.web._seed import seed
from tests.web.conftest import Served


def csrf_of(client: TestClient, path: str = "/dead") -> str:
    """The form token a page's forms carry (the page also sets the session's cookie, which is not the token)."""
    page = client.get(path)
    tokens: set[str] = set(re.findall(rf'name="{CSRF_FIELD}" value="([^"]+)"', page.text))
    assert len(tokens) == 1, tokens
    (token,) = tokens
    session = client.cookies.get(CSRF_COOKIE)
    assert session
    assert session != token
    return token


def test_requeueing_a_dead_job_brings_it_back_to_its_queue(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client, f"/jobs/{seeded.ids['dead']}")
    done = client.post(f"/jobs/{seeded.ids['dead']}/requeue", data={CSRF_FIELD: token})
    assert done.status_code == 200
    assert f"Job {seeded.ids['dead']} is back on its queue." in done.text
    job = served.call(served.store.get_job, seeded.ids["dead"])
    assert job is not None
    assert (job.state, job.attempts) == (JobState.PENDING, 0)
    again = client.post(f"/jobs/{seeded.ids['dead']}/requeue", data={CSRF_FIELD: token})
    assert "is not dead; nothing done" in again.text


def test_requeueing_and_purging_a_queues_dead_jobs_act_on_that_queue_alone(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)
    assert (
        "Requeued 1 dead jobs of emails." in client.post("/actions/requeue-dead/emails", data={CSRF_FIELD: token}).text
    )
    assert "Purged 1 dead jobs of hostile." in client.post("/actions/purge-dead/hostile", data={CSRF_FIELD: token}).text
    stats = {s.queue: s for s in served.call(served.store.queue_stats)}
    assert stats["emails"].dead == 0
    assert stats["emails"].ready == 2
    assert "hostile" not in stats
    assert served.call(served.store.jobs, "emails", JobPhase.DEAD).jobs == ()


def test_an_action_without_the_sessions_csrf_token_is_refused_and_does_nothing(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)
    attempts = [
        {},  # no token at all
        {CSRF_FIELD: "forged"},  # a token that is not the session's
        {CSRF_FIELD: token + "x"},
    ]
    for form in attempts:
        refused = client.post(f"/jobs/{seeded.ids['dead']}/requeue", data=form)
        assert refused.status_code == 403, form
        assert "CSRF" in refused.text
    stranger = served.client()  # another session: the form's token without its cookie
    assert stranger.post(f"/jobs/{seeded.ids['dead']}/requeue", data={CSRF_FIELD: token}).status_code == 403
    assert stranger.post("/actions/purge-dead/emails", data={CSRF_FIELD: token}).status_code == 403
    job = served.call(served.store.get_job, seeded.ids["dead"])
    assert job is not None
    assert job.state is JobState.DEAD


def test_actions_are_posts_only(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    assert client.get(f"/jobs/{seeded.ids['dead']}/requeue").status_code == 405
    assert client.get("/actions/purge-dead/emails").status_code == 405


def test_a_read_only_dashboard_renders_no_buttons_and_reaches_no_action(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client(read_only=True)
    pages = [client.get("/dead"), client.get(f"/jobs/{seeded.ids['dead']}"), client.get("/")]
    for page in pages:
        assert page.status_code == 200
        # The one form left is the search by job id, a GET of a page.
        main = page.text.split("<main>", 1)[1]
        assert "<form" not in main
        assert "<button" not in main
        assert 'method="post"' not in page.text
        assert "read-only" in page.text
    token = client.cookies.get(CSRF_COOKIE)
    assert token
    for path in (f"/jobs/{seeded.ids['dead']}/requeue", "/actions/requeue-dead/emails", "/actions/purge-dead/emails"):
        assert client.post(path, data={CSRF_FIELD: token}).status_code == 404, path  # no such route
    assert served.call(served.store.queue_stats, "emails")[0].dead == 1
    writable = served.client().get("/dead")
    assert "<button" in writable.text  # the same page, not read-only, has them


def test_with_a_token_every_request_must_present_it(served: Served) -> None:
    client = served.client(token="s3cret")
    refused = client.get("/")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic")
    assert client.get("/static/dashboard.css").status_code == 401
    assert client.get("/", auth=("admin", "wrong")).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", auth=("anyone", "s3cret")).status_code == 200
    assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    garbled = base64.b64encode(b"no colon").decode()
    assert client.get("/", headers={"Authorization": f"Basic {garbled}"}).status_code == 401


def test_the_token_comes_from_the_environment_when_not_given(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALKSTORE_WEB_TOKEN", "from-env")
    client = served.client()
    assert client.get("/").status_code == 401
    assert client.get("/", auth=("u", "from-env")).status_code == 200


def test_pages_carry_a_content_security_policy_that_forbids_inline_script(served: Served) -> None:
    page = served.client().get("/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script src=" in page.text
    assert re.search(r"<script>", page.text) is None


def test_a_queue_of_any_name_has_its_dead_jobs_requeued_and_purged(served: Served) -> None:
    odd = "billing/eu?x=1#top"
    queue = served.store.queue(odd)
    served.call(queue.enqueue_many, [1, 2], None)
    for n in range(2):
        job = served.call(queue.claim, f"w{n}")
        assert job is not None
        served.call(job.fail, "boom")
    client = served.client()
    page = client.get("/dead")
    token = csrf_of(client)
    (form,) = re.findall(
        r'<form class="actions every-dead" method="post" action="/actions/filter">(.*?)</form>', page.text, re.S
    )
    fields = {k: html.unescape(v) for k, v in re.findall(r'type="hidden" name="(\w+)" value="([^"]*)"', form)}
    assert fields["queue"] == odd
    requeue = {**fields, CSRF_FIELD: token, "action": "requeue", "confirmed": "yes"}
    assert "Requeued 2 dead jobs of billing/eu?x=1#top." in client.post("/actions/filter", data=requeue).text
    assert served.call(served.store.queue_stats, odd)[0].ready == 2
    purge = "/actions/purge-dead/" + quote(odd, safe="")  # the route, for scripts: the name quoted in the path
    assert "Purged 0 dead jobs of billing/eu?x=1#top." in client.post(purge, data={CSRF_FIELD: token}).text
