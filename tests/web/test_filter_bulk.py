"""Bulk actions on everything matching a filter (ADR 068): a confirmation with the count, then the jobs done a
chunk per request with the progress said between (post/redirect/get), every chunk logged."""

from __future__ import annotations

import html
import re
from functools import partial
from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.testclient import TestClient

from alkstore import JobPhase
from alkstore.adapters.web import CSRF_FIELD, _acting
from alkstore.adapters.web._views import group_key
from alkstore.engine import NewJob
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of


def text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def hidden(page: str) -> dict[str, str]:
    """The fields a page's form posts (its hidden inputs)."""
    return {k: html.unescape(v) for k, v in re.findall(r'type="hidden" name="(\w+)" value="([^"]*)"', page)}


def kill(served: Served, queue: str, tasks: list[str], error: str = "boom") -> list[int]:
    """Jobs of ``tasks`` on ``queue``, each claimed and failed for good."""
    now = served.store.clock.now()
    jobs = [NewJob(queue, f'{{"n": {n}}}'.encode(), 0, now, None, 1, task=task) for n, task in enumerate(tasks)]
    ids = served.call(served.store.engine.enqueue, jobs, now)
    for n, _ in enumerate(tasks):
        job = served.call(served.store.queue(queue).claim, f"w{n}")
        assert job is not None
        served.call(job.fail, error if n % 2 else f"{error} {n}")
    return [int(i) for i in ids]


def run_to_the_end(client: TestClient, first: dict[str, str]) -> tuple[list[str], str]:
    """Post ``first`` (confirmed), then each progress page's form, as a browser would; the progress said
    between chunks and the final message."""
    said: list[str] = []
    answer = client.post("/actions/filter", data=first, follow_redirects=False)
    while True:
        assert answer.status_code == 303
        page = client.get(answer.headers["location"])
        if "/done?" in answer.headers["location"]:
            (message,) = re.findall(r'<p class="message">([^<]*)</p>', page.text)
            return said, html.unescape(message)
        (progress,) = re.findall(r'<p class="message" id="progress">([^<]*)</p>', page.text)
        said.append(html.unescape(progress))
        answer = client.post("/actions/filter", data=hidden(page.text), follow_redirects=False)


def test_requeueing_every_dead_job_of_a_task_asks_with_the_count_then_goes_a_chunk_at_a_time(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_acting, "CHUNK", 3)
    mail = kill(served, "work", ["mail", "report"] * 4 + ["mail"])  # 5 mail, 4 report
    client = served.client()
    page = client.get("/queues/work", params={"state": "dead", "task": "mail"}).text
    form = {**hidden(page.split('class="actions bulk-filter"')[1]), CSRF_FIELD: csrf_of(client, "/schedules")}
    assert (form["queue"], form["state"], form["task"]) == ("work", "dead", "mail")
    asked = client.post("/actions/filter", data={**form, "action": "requeue"})
    assert asked.status_code == 200
    assert "Requeue 5 dead jobs of work, task mail?" in text(asked.text)
    assert served.call(served.store.queue_stats, "work")[0].dead == 9, "asking changed nothing"
    said, message = run_to_the_end(client, hidden(asked.text))
    assert said == ["Requeued 3 of about 5 dead jobs of work, task mail so far."]  # 3 a request, then the last 2
    assert message == "Requeued 5 dead jobs of work, task mail."
    dead = served.call(served.store.jobs, "work", JobPhase.DEAD).jobs
    assert sorted(job.task or "" for job in dead) == ["report"] * 4
    assert {job.id for job in served.call(served.store.jobs, "work", JobPhase.READY).jobs} == set(mail[0::2])
    logged = [(e.action, e.target, e.outcome) for e in reversed(served.call(served.store.actions))]
    assert [entry[0] for entry in logged] == ["filter_bulk"] * 2  # each chunk (asking logs nothing)
    assert {entry[1] for entry in logged} == {"dead jobs of work, task mail"}
    assert logged[-1][2] == message


def test_purging_an_error_group_acts_on_that_group_alone(served: Served) -> None:
    kill(served, "work", ["mail"] * 6)  # "boom" three times, "boom 0/2/4" three times: two groups by text
    client = served.client()
    key = group_key("mail", None, "boom")
    page = client.get("/dead/group", params={"queue": "work", "key": key}).text
    (button,) = [f for f in re.findall(r'action="/actions/dead-group">(.*?)</form>', page, re.S) if "purge" in f]
    asked = client.post("/actions/dead-group", data=hidden(button))  # the group's button: the same run
    assert "Delete 3 dead jobs of work, error group" in text(asked.text)
    _, message = run_to_the_end(client, hidden(asked.text))
    assert message == f"Purged 3 dead jobs of work, error group {key}."
    left = served.call(served.store.jobs, "work", JobPhase.DEAD).jobs
    assert sorted(job.last_error or "" for job in left) == ["boom 0", "boom 2", "boom 4"]


def test_cancelling_every_ready_job_whose_payload_contains_a_value(served: Served) -> None:
    queue = served.store.queue("orders")
    ids = served.call(queue.enqueue_many, [{"customer": n % 3} for n in range(12)], None)
    client = served.client()
    token = csrf_of(client, "/queues/orders")
    form = {CSRF_FIELD: token, "queue": "orders", "state": "ready", "contains": '{"customer": 1}', "action": "cancel"}
    asked = client.post("/actions/filter", data=form)
    assert 'Cancel 4 ready jobs of orders, payload containing {"customer": 1}?' in text(asked.text)
    _, message = run_to_the_end(client, hidden(asked.text))
    assert message == 'Cancelled 4 ready jobs of orders, payload containing {"customer": 1}.'
    left = {job.id for job in served.call(partial(served.store.jobs, "orders", JobPhase.READY, limit=100)).jobs}
    assert left == {int(i) for n, i in enumerate(ids) if n % 3 != 1}


def test_a_confirmed_post_that_skipped_the_asking_page_counts_what_it_acts_on(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_acting, "CHUNK", 3)
    kill(served, "work", ["mail"] * 5)
    client = served.client()
    direct = {CSRF_FIELD: csrf_of(client, "/schedules"), "queue": "work", "state": "dead", "action": "purge"}
    said, message = run_to_the_end(client, {**direct, "task": "mail", "confirmed": "yes"})
    assert said == ["Purged 3 of about 5 dead jobs of work, task mail so far."]  # not "of about 0"
    assert message == "Purged 5 dead jobs of work, task mail."
    kill(served, "work", ["mail"] * 4)
    said, _ = run_to_the_end(client, {**direct, "confirmed": "yes"})  # no filter but the state: the exact count
    assert said == ["Purged 3 of about 4 dead jobs of work so far."]


@pytest.mark.parametrize(
    "form",
    [
        {"action": "requeue", "state": "ready"},
        {"action": "cancel", "state": "dead"},
        {"action": "drop", "state": "dead"},
        {"action": "cancel", "state": "sleeping"},
        {"action": "cancel", "state": "ready", "group": "abc"},
        {"action": "cancel", "state": "ready", "contains": "{not json"},
    ],
)
def test_a_filter_or_action_that_does_not_fit_is_refused_and_does_nothing(served: Served, form: dict[str, str]) -> None:
    served.call(served.store.queue("orders").enqueue, {"customer": 1})
    client = served.client()
    token = csrf_of(client, "/queues/orders")
    refused = client.post("/actions/filter", data={CSRF_FIELD: token, "queue": "orders", **form, "confirmed": "yes"})
    assert refused.status_code == 400
    assert served.call(served.store.queue_stats, "orders")[0].ready == 1


def test_a_progress_page_says_only_what_the_dashboard_signed(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_acting, "CHUNK", 2)
    served.call(served.store.queue("orders").enqueue_many, list(range(5)), None)
    client = served.client()
    token = csrf_of(client, "/queues/orders")
    form = {CSRF_FIELD: token, "queue": "orders", "state": "ready", "action": "cancel", "confirmed": "yes"}
    answer = client.post("/actions/filter", data=form, follow_redirects=False)
    location = answer.headers["location"]
    assert client.get(location).status_code == 200
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    assert client.get("/progress", params={**query, "done": "5000"}).status_code == 400
    assert served.client().get(location).status_code == 400  # another dashboard (secret) never said it
    assert served.client(read_only=True).get(location).status_code == 404
