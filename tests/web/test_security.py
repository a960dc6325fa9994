"""The attacks the dashboard's security layer stops (ADR 060), each made as it was found, with an HTTP client."""

from __future__ import annotations

import pytest

from alkstore.adapters.web import CSRF_COOKIE, CSRF_FIELD
from alkstore.adapters.web._security import AllowedHosts, allowed_hosts, form_token
from alkstore.errors import InvalidOptions
from tests.web._seed import HOSTILE, seed
from tests.web.conftest import Served
from tests.web.test_actions import csrf_of


def test_a_page_whose_name_was_rebound_to_loopback_reads_nothing_and_acts_on_nothing(served: Served) -> None:
    seeded = served.call(seed, served.store)
    token = csrf_of(served.client())  # even holding a session's token (from anywhere) does not help
    rebound = served.client(base_url="http://rebound.example:8080")  # what a rebound page's requests carry
    for path in ("/", "/dead", f"/jobs/{seeded.ids['hostile']}", "/static/dashboard.js", "/fragments/overview"):
        page = rebound.get(path)
        assert page.status_code == 400, path
        assert "does not answer to the host 'rebound.example:8080'" in page.text
        assert CSRF_FIELD not in page.text
        assert HOSTILE[0] not in page.text
    rebound.cookies.set("alkstore_csrf", token)
    paused = rebound.post("/actions/pause/emails", data={CSRF_FIELD: token})
    assert paused.status_code == 400
    assert not served.call(served.store.queue_stats, "emails")[0].paused
    forged = served.client().get("/dead", headers={"Host": "rebound.example"})
    assert forged.status_code == 400


def test_the_loopback_names_and_the_configured_ones_are_allowed(served: Served) -> None:
    for base_url in ("http://127.0.0.1", "http://localhost:8080", "http://[::1]:9000"):
        assert served.client(base_url=base_url).get("/").status_code == 200, base_url
    assert served.client(base_url="http://dash.example.com").get("/").status_code == 400
    configured = {"allowed_hosts": ["dash.example.com", "10.0.0.5:8443"]}
    for base_url in ("https://dash.example.com", "http://dash.example.com:9000", "https://10.0.0.5:8443"):
        assert served.client(base_url=base_url, **configured).get("/").status_code == 200, base_url
    for base_url in ("https://10.0.0.5", "https://10.0.0.5:9443", "http://other.example.com"):
        assert served.client(base_url=base_url, **configured).get("/").status_code == 400, base_url


def test_the_commands_hosts_pin_the_port_it_listens_on() -> None:
    hosts = allowed_hosts("127.0.0.1", 8080)
    assert hosts.names() == ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"]
    assert hosts.allows("127.0.0.1:8080")
    assert hosts.allows("LOCALHOST:8080")
    assert not hosts.allows("127.0.0.1:9999")
    assert not hosts.allows("127.0.0.1")
    assert not hosts.allows(None)
    assert not hosts.allows("")
    assert allowed_hosts("0.0.0.0", 80).names() == ["127.0.0.1:80", "localhost:80", "[::1]:80"]
    assert "[fe80::1]:80" in allowed_hosts("fe80::1", 80).names()
    assert "192.168.1.20:80" in allowed_hosts("192.168.1.20", 80).names()
    assert allowed_hosts("0.0.0.0", 80, ["dash.example.com"]).allows("dash.example.com")


@pytest.mark.parametrize("entry", ["example.com:port", "example.com:70000", "[::1", "[::1]x", ":8080"])
def test_an_allowed_host_that_is_not_a_name_or_name_and_port_is_refused(entry: str) -> None:
    with pytest.raises(InvalidOptions, match=r"port|host|bracket"):
        AllowedHosts([entry])


def test_a_cookie_planted_by_a_page_on_another_port_cannot_act(served: Served) -> None:
    served.call(seed, served.store)
    attacker = served.client(base_url="http://127.0.0.1")
    attacker.headers["Origin"] = "http://127.0.0.1:9999"  # the planting page's origin: cookies ignore ports
    attacker.cookies.set(CSRF_COOKIE, "planted")
    refused = attacker.post("/actions/pause/emails", data={CSRF_FIELD: "planted"})
    assert refused.status_code == 403
    assert "not from this dashboard&#39;s pages" in refused.text
    attacker.headers["Origin"] = "http://127.0.0.1"  # were the Origin check gone, the token still fails
    assert attacker.post("/actions/pause/emails", data={CSRF_FIELD: "planted"}).status_code == 403
    honest = served.client()
    token = csrf_of(honest)
    assert attacker.post("/actions/pause/emails", data={CSRF_FIELD: token}).status_code == 403  # not its session's
    assert not served.call(served.store.queue_stats, "emails")[0].paused
    assert honest.post("/actions/pause/emails", data={CSRF_FIELD: token}).status_code == 200
    assert served.call(served.store.queue_stats, "emails")[0].paused


def test_the_form_token_is_the_sessions_signature_under_the_dashboards_secret(served: Served) -> None:
    client = served.client(secret="one secret")
    token = csrf_of(client, "/schedules")
    session = client.cookies.get(CSRF_COOKIE)
    assert session
    assert token == form_token(b"one secret", session)
    assert form_token(b"another secret", session) != token
    assert form_token(b"one secret", session + "x") != token
    shared = served.client(secret="one secret")  # another process of the same dashboard
    shared.cookies.set(CSRF_COOKIE, session)
    assert shared.post("/actions/pause/emails", data={CSRF_FIELD: token}).status_code == 200
    stranger = served.client()  # a random secret of its own
    stranger.cookies.set(CSRF_COOKIE, session)
    assert stranger.post("/actions/resume/emails", data={CSRF_FIELD: token}).status_code == 403
    with pytest.raises(InvalidOptions, match="empty secret"):
        served.client(secret="")


@pytest.mark.parametrize(
    ("origin", "referer", "allowed"),
    [
        ("http://127.0.0.1", None, True),
        ("http://127.0.0.1:80", None, True),
        ("http://127.0.0.1:9999", None, False),
        ("http://localhost", None, False),  # another name is another origin
        ("null", "http://127.0.0.1/dead", False),  # an opaque origin is none, whatever the Referer says
        ("http://rebound.example", None, False),
        (None, "http://127.0.0.1/queues/emails", True),
        (None, "http://127.0.0.1:9999/attack.html", False),
        (None, None, False),
        ("https://dash.example.com", None, True),  # a configured name (a proxy's) is trusted
        ("https://dash.example.com:8443", None, False),
        ("ftp://127.0.0.1", None, False),
    ],
)
def test_an_action_must_come_from_the_dashboards_own_origin(
    served: Served, origin: str | None, referer: str | None, allowed: bool
) -> None:
    client = served.client(allowed_hosts=["dash.example.com"])
    token = csrf_of(client, "/schedules")
    del client.headers["Origin"]
    headers = {"Origin": origin} if origin is not None else {}
    if referer is not None:
        headers["Referer"] = referer
    acted = client.post("/actions/pause/emails", data={CSRF_FIELD: token}, headers=headers)
    assert acted.status_code == (200 if allowed else 403), acted.text
    assert served.call(served.store.queue_stats, "emails")[0].paused is allowed
