"""Roles and the action log (ADR 068): a read token reads every page and is refused every action (403),
and every action a dashboard takes, or refuses once its form passed, is logged in the store and listed."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from alkstore import JobState
from alkstore.adapters.web import CSRF_FIELD, create_app
from alkstore.adapters.web._log import ACTIONS_PAGE, OUTCOME_CHARS, TARGET_CHARS
from alkstore.errors import InvalidOptions
from tests.web._seed import seed
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of

FULL_TOKEN = "full-token-of-32-characters-long"
READ_TOKEN = "read-token-of-32-characters-long"
#: Every page a GET serves over the seeded store (the ids filled in by the test).
PAGES = ["/", "/dead", "/schedules", "/workers", "/locks", "/actions", "/queues/emails", "/queues/emails?state=dead"]


def roles(served: Served) -> tuple[TestClient, TestClient]:
    """A client with the full token and one with the read token, of one dashboard, from two addresses."""
    app = create_app(served.store, token=FULL_TOKEN, read_token=READ_TOKEN)
    clients = []
    for token, address in ((FULL_TOKEN, "10.0.0.1"), (READ_TOKEN, "10.0.0.2")):
        client = TestClient(app, base_url="http://127.0.0.1", client=(address, 50000))
        client.headers["Origin"] = "http://127.0.0.1"
        client.auth = ("operator", token)
        client.portal = served.portal
        clients.append(client)
    return clients[0], clients[1]


def test_the_read_token_sees_every_page_without_a_button(served: Served) -> None:
    seeded = served.call(seed, served.store)
    full, reader = roles(served)
    for path in [*PAGES, f"/jobs/{seeded.ids['dead']}", f"/jobs/{seeded.ids['ready']}"]:
        page = reader.get(path)
        assert page.status_code == 200, path
        assert 'method="post"' not in page.text, path
        assert "read-only token" in page.text
    assert 'method="post"' in full.get(f"/jobs/{seeded.ids['dead']}").text


def test_a_forged_post_with_the_read_token_is_refused_and_does_nothing(served: Served) -> None:
    """The read token's holder takes a form token from a page of the full role and posts every action."""
    seeded = served.call(seed, served.store)
    full, reader = roles(served)
    token = csrf_of(full)
    reader.cookies = full.cookies  # the session, and its form token: all a form could carry
    forged = [
        (f"/jobs/{seeded.ids['dead']}/requeue", {}),
        ("/actions/requeue-dead/emails", {}),
        ("/actions/purge-dead/emails", {}),
        ("/actions/dead", {"action": "purge", "id": str(seeded.ids["dead"]), "confirmed": "yes"}),
        ("/actions/dead-group", {"action": "purge", "queue": "emails", "key": "x", "confirmed": "yes"}),
        ("/actions/pause/emails", {}),
        ("/actions/settings/emails", {"max_attempts": "1"}),
        ("/actions/filter", {"action": "cancel", "queue": "emails", "state": "ready", "confirmed": "yes"}),
        (f"/jobs/{seeded.ids['ready']}/cancel", {}),
        (f"/jobs/{seeded.ids['ready']}/skip-step", {"name": "charge", "result": "1"}),
        ("/actions/schedules", {"name": "evil", "spec": "@every 1h", "queue": "reports", "payload": ""}),
        ("/actions/unschedule/nightly-digest", {}),
        ("/actions/fire/nightly-digest", {}),
    ]
    for path, form in forged:
        refused = reader.post(path, data={CSRF_FIELD: token, **form}, follow_redirects=False)
        assert refused.status_code == 403, path
        assert "acting takes the full token" in refused.text  # the guard refused it, before any handler
    dead = served.call(served.store.get_job, seeded.ids["dead"])
    assert dead is not None
    assert dead.state is JobState.DEAD
    ready = served.call(served.store.get_job, seeded.ids["ready"])
    assert ready is not None
    assert ready.steps == ()
    assert not served.call(served.store.queue_stats, "emails")[0].paused
    assert served.call(served.store.queue("emails").defaults).max_attempts == 3
    assert [s.name for s in served.call(served.store.schedules)] == ["nightly-digest"]
    assert served.call(served.store.actions) == []  # a refusal by the guard writes nothing
    acted = full.post("/actions/pause/emails", data={CSRF_FIELD: token}, follow_redirects=False)
    assert acted.status_code == 303  # the same form, with the full token
    (entry,) = served.call(served.store.actions)
    assert (entry.role, entry.address, entry.action, entry.target) == (
        "full",
        "10.0.0.1",
        "pause_queue",
        "queue emails",
    )


def test_a_read_token_goes_beside_a_different_full_one(served: Served) -> None:
    with pytest.raises(InvalidOptions):
        create_app(served.store, read_token=READ_TOKEN)
    with pytest.raises(InvalidOptions):
        create_app(served.store, token=FULL_TOKEN, read_token=FULL_TOKEN)
    full, _ = roles(served)
    wrong = TestClient(full.app, base_url="http://127.0.0.1")
    assert wrong.get("/", auth=("operator", "neither-token-of-32-characters!!")).status_code == 401


def test_every_action_is_logged_with_who_what_target_and_outcome(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)
    actions = [
        (f"/jobs/{seeded.ids['dead']}/requeue", {}, "requeue_job", f"job {seeded.ids['dead']}"),
        ("/actions/requeue-dead/hostile", {}, "requeue_queue", "queue hostile"),
        ("/actions/purge-dead/hostile", {}, "purge_queue", "queue hostile"),
        ("/actions/dead", {"action": "purge", "id": "1", "confirmed": "yes"}, "dead_bulk", "purge of 1 chosen: 1"),
        ("/actions/pause/emails", {}, "pause_queue", "queue emails"),
        ("/actions/resume/emails", {}, "resume_queue", "queue emails"),
        (f"/jobs/{seeded.ids['ready']}/cancel", {}, "cancel_job", f"job {seeded.ids['ready']}"),
        (
            "/actions/schedules",
            {"name": "prg", "spec": "@every 1h", "queue": "reports", "payload": ""},
            "add_schedule",
            "schedule prg",
        ),
        ("/actions/fire/prg", {}, "fire_schedule", "schedule prg"),
        ("/actions/unschedule/prg", {}, "remove_schedule", "schedule prg"),
    ]
    said = []
    for path, form, _, _ in actions:
        acted = client.post(path, data={CSRF_FIELD: token, **form}, follow_redirects=False)
        assert acted.status_code == 303, path
        said.append(client.get(acted.headers["location"]).text)
    entries = list(reversed(served.call(served.store.actions)))
    assert [(e.action, e.target) for e in entries] == [(action, target) for _, _, action, target in actions]
    assert {(e.role, e.address) for e in entries} == {("open", "testclient")}
    for entry, page in zip(entries, said, strict=True):
        assert entry.outcome in page.replace("&#39;", "'")
    assert entries[-1].at == served.store.clock.now() or entries[-1].at <= served.store.clock.now()


def test_an_action_refused_after_its_form_passed_is_logged_and_a_forged_one_is_not(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)
    assert client.post("/actions/pause/__alkstore_x", data={CSRF_FIELD: token}).status_code == 404
    bad = {"name": "bad", "spec": "@every never", "queue": "reports", "payload": ""}
    assert client.post("/actions/schedules", data={CSRF_FIELD: token, **bad}).status_code == 400
    confirm = client.post("/actions/dead", data={CSRF_FIELD: token, "action": "purge", "id": "1"})
    assert confirm.status_code == 200  # a page asking to confirm: nothing done, nothing logged
    assert client.post("/actions/pause/emails", data={CSRF_FIELD: "forged"}).status_code == 403
    newest, oldest = served.call(served.store.actions)
    assert (oldest.action, oldest.target) == ("pause_queue", "queue __alkstore_x")
    assert oldest.outcome.startswith("refused (404): ")
    assert (newest.action, newest.target) == ("add_schedule", "schedule bad")
    assert newest.outcome.startswith("refused: InvalidSpec")


def test_a_hostile_target_is_cut_and_shown_escaped_a_page_at_a_time(served: Served) -> None:
    client = served.client()
    token = csrf_of(client, "/schedules")
    name = "<script>alert(1)</script>\u202e" + "x" * 100_000
    form = {CSRF_FIELD: token, "name": name, "spec": "@every 1h", "queue": "reports", "payload": ""}
    assert client.post("/actions/schedules", data=form).status_code == 400
    (entry,) = served.call(served.store.actions)
    assert len(entry.target) == TARGET_CHARS
    assert entry.target.endswith("…")
    assert len(entry.outcome) <= OUTCOME_CHARS
    page = client.get("/actions")
    assert "<script>alert(1)" not in page.text
    assert "schedule &lt;script&gt;alert(1)&lt;/script&gt;&lt;U+202E&gt;xxx" in page.text
    for n in range(ACTIONS_PAGE + 5):
        served.call(
            lambda n=n: served.store.log_action("pause_queue", f"queue q{n}", "Paused.", role="full", address="::1")
        )
    first = client.get("/actions").text
    shown = re.findall(r'<tr data-entry="(\d+)">', first)
    assert len(shown) == ACTIONS_PAGE
    (older,) = re.findall(r'href="/actions\?before=(\d+)"', first)
    rest = re.findall(r'<tr data-entry="(\d+)">', client.get("/actions", params={"before": older}).text)
    assert [int(i) for i in shown + rest] == list(range(ACTIONS_PAGE + 6, 0, -1))
    assert client.get("/actions", params={"before": "nope"}).status_code == 400
    assert client.get("/actions", params={"before": "0"}).status_code == 400
