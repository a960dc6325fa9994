"""A job's workflow on its page and its graph's page (ADR 073, 069): parents, children, steps, sleeps, actions."""

from __future__ import annotations

import html
import json
import re

from alkstore import JobState
from alkstore.adapters.web._graph import read_graph
from alkstore.adapters.web._security import CSRF_FIELD
from tests.web._flow import EVENT, STEP, seed_flow
from tests.web._seed import HOSTILE
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of


def test_a_jobs_page_links_its_parents_and_children_and_says_what_it_waits_on(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    page = served.client().get(f"/jobs/{ids['left']}").text
    section = page.split('<section id="workflow">', 1)[1].split("</section>", 1)[0]
    assert f'href="/jobs/{ids["top"]}"' in re.search(r'class="parents">(.*?)</dd>', section).group(1)  # type: ignore[union-attr]
    assert f'href="/jobs/{ids["bottom"]}"' in re.search(r'class="children">(.*?)</dd>', section).group(1)  # type: ignore[union-attr]
    assert "1 of 1 parents" in section
    assert f'href="/jobs/{ids["left"]}/graph"' in section
    heir = served.client().get(f"/jobs/{ids['heir']}").text
    assert "no parent: all finished" in heir


def test_a_jobs_page_shows_its_steps_and_the_event_it_sleeps_for_escaped(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    page = served.client().get(f"/jobs/{ids['stepped']}").text
    for raw in (STEP, HOSTILE[1], EVENT):
        assert raw not in page
    steps = re.search(r'<ol id="steps">(.*?)</ol>', page, re.S)
    assert steps is not None
    assert html.escape(STEP, quote=False) in steps.group(1)
    assert "onerror=alert(1)" in html.unescape(steps.group(1))
    sleeping = re.search(r'class="waits-for">(.*?)</dd>', page, re.S)
    assert sleeping is not None
    assert EVENT in html.unescape(sleeping.group(1))
    assert "UTC" in sleeping.group(1)


def test_the_graph_page_draws_every_job_by_depth_with_its_state(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    page = served.client().get(f"/jobs/{ids['bottom']}/graph")
    assert page.status_code == 200
    rows = re.findall(r'<li class="depth" data-depth="(\d+)">(.*?)</ul>', page.text, re.S)
    drawn = [sorted(int(j) for j in re.findall(r'data-job="(\d+)"', row)) for _, row in rows]
    assert drawn == [[ids["top"]], sorted([ids["left"], ids["right"]]), [ids["bottom"]]]
    assert 'id="cut"' not in page.text
    assert "state-pending root" in page.text
    assert served.client().get("/jobs/999999999/graph").status_code == 404


def test_a_graph_is_cut_at_its_bound_and_says_so(served: Served) -> None:
    ids = served.call(seed_flow, served.store)

    async def never(_: int) -> bool:
        return False

    graph = served.call(read_graph, served.store.get_job, never, ids["top"], 2)
    assert graph is not None
    assert graph.cut
    assert sum(len(row) for row in graph.rows) == 2
    whole = served.call(read_graph, served.store.get_job, never, ids["top"], 4)
    assert whole is not None
    assert not whole.cut


def test_a_graphs_jobs_are_retried_and_cancelled_from_its_page_and_logged(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    client = served.client()
    token = csrf_of(client, f"/jobs/{ids['lost']}/graph")
    retried = client.post(f"/jobs/{ids['lost']}/requeue", data={CSRF_FIELD: token, "graph": str(ids["lost"])})
    assert f"Job {ids['lost']} is back on its queue." in retried.text
    assert f'href="/jobs/{ids["lost"]}/graph"' in retried.text
    job = served.call(served.store.get_job, ids["lost"])
    assert job is not None
    assert job.state is JobState.PENDING
    token = csrf_of(client, f"/jobs/{ids['top']}/graph")
    cancelled = client.post(f"/jobs/{ids['top']}/cancel", data={CSRF_FIELD: token, "graph": str(ids["left"])})
    assert cancelled.status_code == 200
    assert f'href="/jobs/{ids["left"]}/graph"' in cancelled.text
    for gone in ("top", "left", "right", "bottom"):  # the dependents' policy (cancel) follows down the graph
        assert served.call(served.store.get_job, ids[gone]) is None
    logged = [(entry.action, entry.target) for entry in served.call(served.store.actions)]
    assert ("cancel_job", f"job {ids['top']}") in logged
    assert ("requeue_job", f"job {ids['lost']}") in logged


def test_a_read_only_graph_page_offers_no_action(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    page = served.client(read_only=True).get(f"/jobs/{ids['top']}/graph")
    assert page.status_code == 200
    assert 'method="post"' not in page.text
    assert f'data-job="{ids["bottom"]}"' in page.text


def test_a_step_is_skipped_from_the_jobs_page_escaped_and_logged(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    client = served.client()
    token = csrf_of(client, f"/jobs/{ids['top']}")
    assert 'id="skip-step"' in client.get(f"/jobs/{ids['top']}").text
    form = {CSRF_FIELD: token, "name": STEP, "result": json.dumps({"said": HOSTILE[1]})}
    skipped = client.post(f"/jobs/{ids['top']}/skip-step", data=form, follow_redirects=False)
    assert skipped.status_code == 303
    done = client.get(skipped.headers["location"]).text
    assert STEP not in done
    assert html.escape(f"step {STEP} stored as finished", quote=False) in done
    job = served.call(served.store.get_job, ids["top"])
    assert job is not None
    assert [(step.name, step.result) for step in job.steps] == [(STEP, {"said": HOSTILE[1]})]
    page = client.get(f"/jobs/{ids['top']}").text
    assert STEP not in page
    assert HOSTILE[1] not in page
    logged = [(entry.action, entry.target) for entry in served.call(served.store.actions)]
    assert ("skip_step", f"job {ids['top']}, step {STEP}") in logged


def test_a_bad_skip_brings_the_form_back_with_why_and_writes_nothing(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    client = served.client()
    token = csrf_of(client, f"/jobs/{ids['top']}")
    for name, result, why in (
        (HOSTILE[0], "{'not': json}", "the result is not JSON"),
        ("__alkstore_wait:1", "1", "reserved"),
        ("", "1", "empty"),
        ("charge", "NaN", "JSON"),
    ):
        refused = client.post(f"/jobs/{ids['top']}/skip-step", data={CSRF_FIELD: token, "name": name, "result": result})
        assert refused.status_code == 400, name
        problem = re.search(r'<p class="problem" id="skip-problem">(.*?)</p>', refused.text, re.S)
        assert problem is not None
        assert why in html.unescape(problem.group(1))
        assert HOSTILE[0] not in refused.text
    job = served.call(served.store.get_job, ids["top"])
    assert job is not None
    assert job.steps == ()
    outcomes = [entry.outcome for entry in served.call(served.store.actions)]
    assert len(outcomes) == 4
    assert all(outcome.startswith("refused: ") for outcome in outcomes)


def test_a_skip_of_a_running_or_missing_job_is_refused(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    client = served.client()
    token = csrf_of(client, f"/jobs/{ids['top']}")
    running = served.call(served.store.queue("flow").claim, "w-3")
    assert running is not None
    page = client.get(f"/jobs/{running.id}").text
    assert 'id="skip-step"' not in page  # no form for a running job; a post anyway is refused
    refused = client.post(f"/jobs/{running.id}/skip-step", data={CSRF_FIELD: token, "name": "charge", "result": "1"})
    assert refused.status_code == 409
    assert "is running" in refused.text
    missing = client.post("/jobs/999999999/skip-step", data={CSRF_FIELD: token, "name": "charge", "result": "1"})
    assert missing.status_code == 404
    job = served.call(served.store.get_job, running.id)
    assert job is not None
    assert job.steps == ()


def test_a_read_only_dashboard_has_no_skip_form_and_no_route(served: Served) -> None:
    ids = served.call(seed_flow, served.store)
    reader = served.client(read_only=True)
    assert 'id="skip-step"' not in reader.get(f"/jobs/{ids['top']}").text
    refused = reader.post(f"/jobs/{ids['top']}/skip-step", data={"name": "charge", "result": "1"})
    assert refused.status_code in (403, 404, 405)
