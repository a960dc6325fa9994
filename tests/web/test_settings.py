"""A queue's settings edited from its page: stored through ``Queue.configure``, checked by the core's rules
(a refusal names the error on the form and writes nothing), logged; hostile text shown escaped."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from alkstore.adapters.web import CSRF_FIELD
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of

#: Every field of the form, as an operator fills it in.
FILLED = {
    "visibility_timeout": "90",
    "max_attempts": "7",
    "backoff_base": "2.5",
    "backoff_cap": "600",
    "priority": "-3",
    "concurrency": "4",
    "keep_results": "3600",
}


def fields_of(page: str) -> dict[str, str]:
    return dict(re.findall(r'<input name="(\w+)" value="([^"]*)" inputmode="decimal"', page))


def test_the_form_shows_the_queues_settings_and_saving_stores_every_one(served: Served) -> None:
    served.call(served.store.queue("emails").enqueue, "x")
    client = served.client()
    page = client.get("/queues/emails").text
    assert fields_of(page) == {
        "visibility_timeout": "300",
        "max_attempts": "3",
        "backoff_base": "5",
        "backoff_cap": "3600",
        "priority": "0",
        "concurrency": "",
        "keep_results": "",
    }
    token = csrf_of(client, "/queues/emails")
    saved = client.post("/actions/settings/emails", data={CSRF_FIELD: token, **FILLED}, follow_redirects=False)
    assert saved.status_code == 303
    said = client.get(saved.headers["location"]).text
    assert "Saved the settings of emails: lease 1m30s, 7 attempts" in said
    defaults = served.call(served.store.queue("emails").defaults)
    assert defaults.visibility_timeout == timedelta(seconds=90)
    assert (defaults.max_attempts, defaults.priority, defaults.concurrency) == (7, -3, 4)
    assert (defaults.backoff_base, defaults.backoff_cap) == (timedelta(seconds=2.5), timedelta(minutes=10))
    assert defaults.keep_results == timedelta(hours=1)
    assert fields_of(client.get("/queues/emails").text) == FILLED
    (entry,) = served.call(served.store.actions)
    assert (entry.action, entry.target) == ("configure_queue", "queue emails")
    assert entry.outcome.startswith("Saved the settings of emails")
    blank = dict.fromkeys(FILLED, "")
    client.post("/actions/settings/emails", data={CSRF_FIELD: token, **blank})
    assert served.call(served.store.queue("emails").defaults).max_attempts == 3  # blank: the default again


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("max_attempts", "lots", "InvalidOptions: Max attempts: &#39;lots&#39; is not a whole number"),
        ("max_attempts", "0", "InvalidOptions: max_attempts"),
        ("visibility_timeout", "nan", "InvalidOptions: visibility_timeout must be finite"),
        ("visibility_timeout", "-5", "InvalidOptions: visibility_timeout"),
        ("backoff_base", "7200", "InvalidOptions: backoff_base (2:00:00) must not exceed backoff_cap"),
        ("concurrency", "2.5", "InvalidOptions: Concurrency cap: &#39;2.5&#39; is not a whole number"),
        ("keep_results", "1e400", "InvalidOptions: keep_results must be finite"),
    ],
)
def test_a_setting_the_core_refuses_is_named_on_the_form_and_nothing_is_written(
    served: Served, field: str, value: str, said: str
) -> None:
    served.call(served.store.queue("emails").enqueue, "x")
    client = served.client()
    token = csrf_of(client, "/queues/emails")
    before = served.call(served.store.queue("emails").defaults)
    form = {**FILLED, field: value}
    refused = client.post("/actions/settings/emails", data={CSRF_FIELD: token, **form})
    assert refused.status_code == 400
    assert said in refused.text
    assert 'id="settings-problem"' in refused.text
    assert fields_of(refused.text) == form  # the form as sent, to correct
    assert served.call(served.store.queue("emails").defaults) == before
    (entry,) = served.call(served.store.actions)
    assert entry.outcome.startswith("refused: InvalidOptions")


def test_hostile_text_in_a_field_comes_back_escaped_and_cut_in_the_error(served: Served) -> None:
    client = served.client()
    token = csrf_of(client, "/queues/emails")
    hostile = '"><script>alert(1)</script>\u202e' + "9" * 100_000
    refused = client.post("/actions/settings/emails", data={CSRF_FIELD: token, **FILLED, "priority": hostile})
    assert refused.status_code == 400
    assert "<script>alert(1)" not in refused.text
    assert "&lt;U+202E&gt;" in refused.text
    (problem,) = re.findall(r'<p class="problem" id="settings-problem">([^<]*)</p>', refused.text)
    assert len(problem) < 400


def test_an_outbox_or_a_reserved_name_has_no_settings_to_edit_here(served: Served) -> None:
    served.call(served.store.outbox("hooks").enqueue, {"event": "paid"})
    client = served.client()
    token = csrf_of(client, "/queues/emails")
    assert 'id="settings"' not in client.get("/outboxes/hooks").text
    refused = client.post("/actions/settings/__alkstore_outbox:hooks", data={CSRF_FIELD: token, **FILLED})
    assert refused.status_code == 404
    assert 'id="settings"' not in served.client(read_only=True).get("/queues/emails").text
