"""The dashboard's queue, job, schedule and bulk dead-letter actions, read back through the store (every engine)."""

from __future__ import annotations

import html
import re

import pytest

from alkstore import JobPhase
from alkstore.adapters.web import CSRF_COOKIE, CSRF_FIELD, _acting
from alkstore.engine import NewSchedule
from tests.web._seed import seed
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of
from tests.web.test_filter_bulk import hidden, run_to_the_end
from tests.web.test_pages import text


def message(page: str) -> str:
    found = re.search(r'<p class="message">(.*?)</p>', page, re.S)
    assert found is not None, page
    return html.unescape(found.group(1))


def test_pausing_and_resuming_a_queue_shows_its_state_and_reaches_the_store(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client, "/queues/emails")
    assert 'action="/actions/pause/emails"' in client.get("/queues/emails").text
    done = client.post("/actions/pause/emails", data={CSRF_FIELD: token})
    assert message(done.text).startswith("Paused emails: workers stop claiming its jobs")
    assert served.call(served.store.queue_stats, "emails")[0].paused
    page = client.get("/queues/emails").text
    assert '<span class="badge paused">paused</span>' in page
    assert 'action="/actions/resume/emails"' in page
    assert 'action="/actions/pause/emails"' not in page
    assert served.call(served.store.queue("emails").claim, "w9") is None, "a paused queue hands out nothing"
    overview = re.search(r'<tr data-queue="emails">(.*?)</tr>', client.get("/").text, re.S)
    assert overview is not None
    assert '<span class="badge paused">paused</span>' in overview.group(1)
    assert message(client.post("/actions/resume/emails", data={CSRF_FIELD: token}).text).startswith("Resumed emails")
    assert not served.call(served.store.queue_stats, "emails")[0].paused
    assert "badge paused" not in client.get("/queues/emails").text


def test_cancelling_says_what_happened_a_running_job_is_cancelling_not_gone(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client, "/queues/emails?state=running")
    running = seeded.ids["running"]
    assert f'action="/jobs/{running}/cancel"' in client.get("/queues/emails?state=running").text
    said = message(client.post(f"/jobs/{running}/cancel", data={CSRF_FIELD: token}).text)
    assert said.startswith(f"Job {running} is running: cancelling.")
    job = served.call(served.store.get_job, running)
    assert job is not None
    assert job.cancel_requested
    listing = client.get("/queues/emails?state=running").text
    assert '<span class="cancelling">cancelling</span>' in listing
    assert f'action="/jobs/{running}/cancel"' not in listing
    assert "(cancelling: its worker was asked to stop it)" in text(client.get(f"/jobs/{running}").text)
    ready = seeded.ids["ready"]
    said = message(client.post(f"/jobs/{ready}/cancel", data={CSRF_FIELD: token}).text)
    assert said == f"Job {ready} was waiting to run: it is cancelled and deleted."
    assert served.call(served.store.get_job, ready) is None
    dead = seeded.ids["dead"]
    assert "is dead: nothing to cancel" in message(client.post(f"/jobs/{dead}/cancel", data={CSRF_FIELD: token}).text)
    assert "is gone" in message(client.post(f"/jobs/{ready}/cancel", data={CSRF_FIELD: token}).text)
    assert "Cancel this job" not in client.get(f"/jobs/{dead}").text


def test_adding_a_schedule_registers_it_and_a_bad_one_is_named_and_writes_nothing(served: Served) -> None:
    client = served.client()
    token = csrf_of(client, "/schedules")
    form = {CSRF_FIELD: token, "name": "digest", "spec": "@every 5m", "queue": "reports", "payload": '{"kind": 1}'}
    assert message(client.post("/actions/schedules", data=form).text).startswith(
        "Added schedule digest: @every 5m onto reports"
    )
    (schedule,) = served.call(served.store.schedules)
    assert (schedule.name, schedule.spec, schedule.queue, schedule.payload) == (
        "digest",
        "@every 5m",
        "reports",
        {"kind": 1},
    )
    refusals = {
        "InvalidSpec": form | {"name": "cronlike", "spec": "*/5 * * * *"},
        "The payload is not JSON": form | {"name": "broken", "payload": "{kind: 1"},
        "A schedule named 'digest' exists already": form | {"payload": "2"},
        "InvalidName": form | {"name": "bad\nname"},
    }
    for named, bad in refusals.items():
        refused = client.post("/actions/schedules", data=bad)
        assert refused.status_code == 400, named
        problem = re.search(r'<p class="problem" id="problem">(.*?)</p>', refused.text, re.S)
        assert problem is not None
        assert named in html.unescape(problem.group(1)), named
        assert f'value="{html.escape(bad["spec"])}"' in refused.text  # the form comes back filled in
    assert served.call(served.store.schedules) == [schedule], "a refused add wrote nothing"


def test_firing_a_schedule_now_enqueues_its_job_and_leaves_its_boundaries(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client, "/schedules")
    (before,) = served.call(served.store.schedules)
    assert 'action="/actions/fire/nightly-digest"' in client.get("/schedules").text
    done = client.post("/actions/fire/nightly-digest", data={CSRF_FIELD: token})
    said = message(done.text)
    assert said.startswith("Fired nightly-digest now: job ")
    job_id = int(re.search(r"job (\d+) on reports", said).group(1))  # type: ignore[union-attr]
    job = served.call(served.store.get_job, job_id)
    assert job is not None
    assert (job.queue, job.payload) == ("reports", {"kind": "digest"})
    assert served.call(served.store.schedules) == [before]
    assert "No schedule gone; nothing done." in client.post("/actions/fire/gone", data={CSRF_FIELD: token}).text
    removed = client.post("/actions/unschedule/nightly-digest", data={CSRF_FIELD: token})
    assert message(removed.text) == "Removed schedule nightly-digest; jobs it fired stay."
    assert served.call(served.store.schedules) == []
    assert served.call(served.store.get_job, job_id) is not None
    again = client.post("/actions/unschedule/nightly-digest", data={CSRF_FIELD: token})
    assert message(again.text) == "No schedule nightly-digest; nothing done."


def test_firing_a_periodic_tasks_schedule_now_enqueues_a_job_of_its_task(served: Served) -> None:
    store = served.store
    periodic = NewSchedule("rebuild-index", "@every 1d", 86400, "reports", b'{"full": true}', task="rebuild")
    served.call(store.engine.register_schedules, [periodic], store.clock.now())
    client = served.client()
    token = csrf_of(client, "/schedules")
    row = re.search(r'<tr data-schedule="rebuild-index">(.*?)</tr>', client.get("/schedules").text, re.S)
    assert row is not None
    assert '<td class="task"><a href="/queues/reports?task=rebuild">rebuild</a></td>' in row.group(1)
    said = message(client.post("/actions/fire/rebuild-index", data={CSRF_FIELD: token}).text)
    assert said.startswith("Fired rebuild-index now: job ")
    assert " (task rebuild) on reports." in said
    job_id = int(re.search(r"job (\d+) ", said).group(1))  # type: ignore[union-attr]
    job = served.call(store.get_job, job_id)
    assert job is not None
    assert (job.queue, job.task, job.payload, job.boundary) == ("reports", "rebuild", {"full": True}, None)


def kill_many(served: Served, queue: str, errors: list[str]) -> list[int]:
    ids = served.call(served.store.queue(queue).enqueue_many, list(range(len(errors))), None)
    for n, error in enumerate(errors):
        job = served.call(served.store.queue(queue).claim, f"w{n}")
        assert job is not None
        served.call(job.fail, error)
    return [int(i) for i in ids]


def group_forms(page: str) -> dict[str, dict[str, str]]:
    """Each group's bulk forms on a dead-letters page: ``action:key`` to the fields it sends."""
    forms: dict[str, dict[str, str]] = {}
    pattern = r'<form method="post" action="/actions/dead-group">(.*?)</form>'
    for body in re.findall(pattern, page, re.S):
        fields = {name: html.unescape(value) for name, value in re.findall(r'name="(\w+)" value="([^"]*)"', body)}
        forms[f"{fields['action']}:{fields['key']}"] = fields
    return forms


def test_a_groups_requeue_asks_with_the_count_then_requeues_every_job_of_that_group_alone(served: Served) -> None:
    errors = [f"CardError: card {n} declined" for n in range(7)] + ["timeout"]
    ids = kill_many(served, "billing", errors)
    client = served.client()
    page = client.get("/dead").text
    (key,) = re.findall(r'<tr class="group" data-key="(\w+)">\s*<td class="n count">7</td>', page)
    form = group_forms(page)[f"requeue:{key}"]
    assert form["queue"] == "billing"
    asked = client.post("/actions/dead-group", data=form)
    assert f"Requeue 7 dead jobs of billing, error group {key}?" in text(asked.text)
    assert 'action="/actions/filter"' in asked.text, "confirmed, it goes on as a bulk run over the group"
    assert served.call(served.store.queue_stats, "billing")[0].dead == 8, "asking changed nothing"
    one_more = kill_many(served, "billing", ["CardError: card 99 declined"])  # dies meanwhile: read again
    confirmed = {**form, "confirmed": "yes"}
    done = client.post("/actions/dead-group", data=confirmed)
    assert message(done.text) == f"Requeued 8 dead jobs of billing, error group {key}."
    (stats,) = served.call(served.store.queue_stats, "billing")
    assert (stats.ready, stats.dead) == (8, 1)
    left = served.call(served.store.jobs, "billing", JobPhase.DEAD).jobs
    assert [job.id for job in left] == [ids[-1]]
    assert one_more[0] not in [job.id for job in left]
    again = message(client.post("/actions/dead-group", data=confirmed).text)
    assert again == f"Requeued 0 dead jobs of billing, error group {key}."
    purge = group_forms(client.get("/dead").text).popitem()[1]
    purge = {**purge, "action": "purge", "confirmed": "yes"}
    said = f"Purged 1 dead jobs of billing, error group {purge['key']}."
    assert message(client.post("/actions/dead-group", data=purge).text) == said
    assert served.call(served.store.queue_stats, "billing")[0].dead == 0
    for bad in ({**purge, "action": "drop"}, {**purge, "key": ""}):
        assert client.post("/actions/dead-group", data=bad).status_code == 400
    unsigned = {key: value for key, value in purge.items() if key != CSRF_FIELD}
    assert client.post("/actions/dead-group", data=unsigned).status_code == 403


def test_a_groups_button_acts_a_chunk_a_request_with_its_progress_signed_between(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_acting, "CHUNK", 2)
    kill_many(served, "billing", [f"CardError: card {n} declined" for n in range(5)] + ["timeout"])
    client = served.client()
    page = client.get("/dead").text
    (key,) = re.findall(r'<tr class="group" data-key="(\w+)">\s*<td class="n count">5</td>', page)
    asked = client.post("/actions/dead-group", data=group_forms(page)[f"purge:{key}"])
    assert f"Delete 5 dead jobs of billing, error group {key}?" in text(asked.text)
    said, done = run_to_the_end(client, hidden(asked.text))
    group = f"dead jobs of billing, error group {key}"
    # The listing is read 2 a request, newest death first: the timeout (not of the group), then the cards.
    assert said == [f"Purged 1 of about 5 {group} so far.", f"Purged 3 of about 5 {group} so far."]
    assert done == f"Purged 5 {group}."
    logged = [entry.action for entry in served.call(served.store.actions)]
    assert logged == ["filter_bulk"] * 3, "each chunk logged (asking logs nothing)"
    left = served.call(served.store.jobs, "billing", JobPhase.DEAD).jobs
    assert [job.last_error for job in left] == ["timeout"]


def test_a_queues_requeue_all_button_asks_with_the_count_then_goes_a_chunk_a_request(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_acting, "CHUNK", 2)
    kill_many(served, "billing", ["a", "b", "c"])
    kill_many(served, "other", ["d"])
    client = served.client()
    page = client.get("/dead").text
    section = page.split('<section class="dead-queue" data-queue="billing">', 1)[1].split("</section>", 1)[0]
    (form,) = re.findall(
        r'<form class="actions every-dead" method="post" action="/actions/filter">(.*?)</form>', section, re.S
    )
    asked = client.post("/actions/filter", data={**hidden(form), "action": "requeue"})
    assert "Requeue 3 dead jobs of billing?" in text(asked.text)
    assert served.call(served.store.queue_stats, "billing")[0].dead == 3, "asking changed nothing"
    said, done = run_to_the_end(client, hidden(asked.text))
    assert said == ["Requeued 2 of about 3 dead jobs of billing so far."]
    assert done == "Requeued 3 dead jobs of billing."
    assert [(s.queue, s.ready, s.dead) for s in served.call(served.store.queue_stats)] == [
        ("billing", 3, 0),
        ("other", 0, 1),
    ]


def test_purging_a_selection_deletes_the_chosen_dead_jobs_and_never_a_live_one(served: Served) -> None:
    ids = kill_many(served, "billing", ["a", "b", "c"])
    live = int(served.call(served.store.queue("billing").enqueue, "alive"))
    client = served.client()
    token = csrf_of(client)
    page = client.get("/dead").text
    assert '<form id="bulk"' in page
    chosen = [str(ids[0]), str(ids[2]), str(live)]
    asked = client.post("/actions/dead", data={CSRF_FIELD: token, "action": "purge", "id": chosen})
    assert "Delete 3 dead jobs? This cannot be undone." in text(asked.text)
    assert served.call(served.store.get_job, ids[0]) is not None
    confirmed = {CSRF_FIELD: token, "action": "purge", "id": chosen, "confirmed": "yes"}
    said = message(client.post("/actions/dead", data=confirmed).text)
    assert said == "Purged 2 jobs (1 of those chosen were no longer dead)."
    assert [job.id for job in served.call(served.store.jobs, "billing", JobPhase.DEAD).jobs] == [ids[1]]
    assert served.call(served.store.get_job, live) is not None
    nothing = client.post("/actions/dead", data={CSRF_FIELD: token, "action": "purge", "confirmed": "yes"})
    assert message(nothing.text) == "No dead job was chosen; nothing done."
    for bad in ({"action": "drop", "id": chosen}, {"action": "purge", "id": ["x"]}):
        assert client.post("/actions/dead", data={CSRF_FIELD: token, **bad}).status_code == 400
    assert client.post("/actions/dead", data={"action": "purge", "id": chosen, "confirmed": "yes"}).status_code == 403


def test_a_read_only_dashboard_reaches_none_of_these_actions(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client(read_only=True)
    for path in ("/queues/emails", "/queues/emails?state=running", "/schedules", "/dead"):
        page = client.get(path).text
        assert 'method="post"' not in page, path  # the search and the queue page's filter are GET forms
        gets = page.count('<form class="filter" method="get"') + page.count('<form class="find" method="get"')
        assert page.count("<button") == gets, path
        assert 'type="checkbox"' not in page, path
    token = client.cookies.get(CSRF_COOKIE)
    assert token
    paths = [
        "/actions/pause/emails",
        "/actions/resume/emails",
        f"/jobs/{seeded.ids['running']}/cancel",
        "/actions/schedules",
        "/actions/unschedule/nightly-digest",
        "/actions/fire/nightly-digest",
        "/actions/dead",
        "/actions/dead-group",
    ]
    for path in paths:
        assert client.post(path, data={CSRF_FIELD: token, "action": "purge", "id": "1"}).status_code in (404, 405), path
    assert not served.call(served.store.queue_stats, "emails")[0].paused
    assert len(served.call(served.store.schedules)) == 1
