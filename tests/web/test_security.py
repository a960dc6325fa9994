"""The attacks the dashboard's security layer stops (ADR 060), each made as it was found, with an HTTP client."""

from __future__ import annotations

import re
import select
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient

import alkstore
from alkstore import EnqueueOpts, ManualClock
from alkstore.adapters.web import CSRF_COOKIE, CSRF_FIELD, create_app
from alkstore.adapters.web._app import BULK_LIMIT, MAX_BODY
from alkstore.adapters.web._command import serve_dashboard
from alkstore.adapters.web._security import (
    LOGIN_FAILURES,
    LOGIN_WINDOW,
    AllowedHosts,
    LoginThrottle,
    allowed_hosts,
    form_token,
)
from alkstore.adapters.web._views import BIDI_CONTROLS
from alkstore.engine import WorkerRecord
from alkstore.errors import InvalidOptions
from tests.support import PATIENCE
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


def test_a_huge_body_is_refused_unread_before_any_token_check(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    huge = b"csrf_token=x&id=" + b"9" * (20 * 1024 * 1024)  # the 20 MB POST that took 3.9 s and 850 MB to parse
    refused = client.post("/actions/dead", content=huge, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert refused.status_code == 413  # not 403: refused on its Content-Length, before the token is looked at
    assert f"at most {MAX_BODY:,} bytes" in refused.text
    just_over = client.post("/actions/dead", content=b"x" * (MAX_BODY + 1))
    assert just_over.status_code == 413
    assert client.post("/", content=b"x", headers={"Content-Length": "lots"}).status_code == 400


def test_a_body_streamed_without_a_length_is_refused_past_the_limit(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)

    def stream() -> Iterator[bytes]:
        yield f"{CSRF_FIELD}={token}&action=purge&id=".encode()
        for _ in range(1024):  # 1 MB in 1 KB chunks, sent chunked (no Content-Length)
            yield b"9" * 1024

    refused = client.post("/actions/dead", content=stream())
    assert refused.status_code == 413
    assert "at most" in refused.text
    assert served.call(served.store.queue_stats, "emails")[0].dead == 1


def request_head(port: int, *headers: str) -> bytes:
    lines = ["POST /actions/dead HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Origin: http://127.0.0.1:{port}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_on_the_wire_a_declared_huge_body_is_answered_413_before_a_byte_of_it_is_sent() -> None:
    with alkstore.open("memory://") as store, serve_dashboard(store, 0) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
            sock.sendall(
                request_head(port, "Content-Length: 20971520", "Content-Type: application/x-www-form-urlencoded")
            )
            assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")


def test_on_the_wire_a_chunked_body_is_answered_413_long_before_its_end() -> None:
    total = 64 * 1024 * 1024  # far more than the socket buffers between client and server hold
    chunk = b"10000\r\n" + b"9" * 0x10000 + b"\r\n"
    with alkstore.open("memory://") as store, serve_dashboard(store, 0) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
            sock.sendall(request_head(port, "Transfer-Encoding: chunked"))
            sent = 0
            answered = False
            while sent < total and not answered:
                readable, writable, _ = select.select([sock], [sock], [], PATIENCE)
                answered = bool(readable)
                if writable and not answered:
                    try:
                        sock.sendall(chunk)
                    except OSError:  # the server closed its end: its answer is waiting
                        break
                    sent += 0x10000
            assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")
            assert sent < total


def test_the_limit_holds_a_bulk_action_of_the_most_ids_it_takes(served: Served) -> None:
    client = served.client()
    token = csrf_of(client, "/schedules")
    form = {CSRF_FIELD: token, "action": "requeue", "id": [str(10**18 + n) for n in range(BULK_LIMIT)]}
    asked = client.post("/actions/dead", data=form)
    assert asked.status_code == 200
    assert f"Requeue {BULK_LIMIT} dead jobs" in asked.text


def test_every_response_carries_the_security_headers(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client(token="a-token-long-enough-for-anywhere")
    authed = {"Authorization": "Bearer a-token-long-enough-for-anywhere"}
    responses = {
        "page": client.get("/dead", headers=authed),
        "static script": client.get("/static/dashboard.js", headers=authed),
        "static style": client.get("/static/dashboard.css", headers=authed),
        "missing job": client.get("/jobs/999999", headers=authed),
        "redirect": client.get("/dead/", headers=authed, follow_redirects=False),
        "no token": client.get("/"),
        "other host": client.get("/", headers={**authed, "Host": "rebound.example"}),
        "too large": client.post("/actions/dead", headers=authed, content=b"x" * (MAX_BODY + 1)),
        "forged": client.post(f"/jobs/{seeded.ids['dead']}/requeue", headers=authed, data={CSRF_FIELD: "x"}),
    }
    statuses = {name: response.status_code for name, response in responses.items()}
    assert statuses == {
        "page": 200,
        "static script": 200,
        "static style": 200,
        "missing job": 404,
        "redirect": 307,
        "no token": 401,
        "other host": 400,
        "too large": 413,
        "forged": 403,
    }
    for name, response in responses.items():
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy, name
        assert "frame-ancestors 'none'" in policy, name
        assert "unsafe-inline" not in policy, name
        assert response.headers.get("x-content-type-options") == "nosniff", name
        assert response.headers.get("referrer-policy") == "same-origin", name
        assert response.headers.get("x-frame-options") == "DENY", name
    assert responses["page"].headers["cache-control"] == "no-store"


def test_the_pages_need_no_inline_script_or_style_that_the_policy_would_block(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    for path in (
        "/",
        "/fragments/overview",
        "/dead",
        "/schedules",
        "/locks",
        "/actions",
        "/charts?range=24h",
        "/queues/emails",
        f"/jobs/{seeded.ids['dead']}",
    ):
        tags = [re.sub(r'"[^"]*"', '""', tag) for tag in re.findall(r"<[a-z][^>]*>", client.get(path).text)]
        assert tags, path
        assert [tag for tag in tags if tag.startswith("<script") and " src=" not in tag] == [], path  # values blanked
        assert [tag for tag in tags if re.search(r"^<style\b|\sstyle=|\son[a-z]+=", tag)] == [], path


def test_the_trailing_slash_redirect_is_relative_whatever_the_host_says(served: Served) -> None:
    client = served.client(allowed_hosts=["dash.example.com"])
    for host in ("127.0.0.1", "dash.example.com", "localhost:8080"):
        moved = client.get("/dead/", headers={"Host": host}, follow_redirects=False)
        assert moved.status_code == 307
        assert moved.headers["location"] == "/dead", host
    moved = client.get("/schedules/?x=1", follow_redirects=False)
    assert moved.headers["location"] == "/schedules?x=1"
    assert client.get("/nowhere/", follow_redirects=False).status_code == 404
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    service = Starlette(routes=[Mount("/ops/alkstore", app=create_app(served.store))])
    mounted = TestClient(service, base_url="http://127.0.0.1")
    mounted.portal = served.portal
    moved = mounted.get("/ops/alkstore/dead/", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (307, "/ops/alkstore/dead")
    assert mounted.get("/ops/alkstore/static/nothing.css/", follow_redirects=False).status_code == 404
    assert client.get("/queues/emails", params={"state": "sleeping"}, follow_redirects=False).status_code == 404


def test_every_action_answers_with_a_redirect_so_reloading_its_page_repeats_nothing(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    token = csrf_of(client)
    actions = [
        (f"/jobs/{seeded.ids['dead']}/requeue", {}),
        ("/actions/requeue-dead/hostile", {}),
        ("/actions/purge-dead/hostile", {}),
        ("/actions/dead", {"action": "purge", "id": "1", "confirmed": "yes"}),
        ("/actions/pause/emails", {}),
        ("/actions/resume/emails", {}),
        (f"/jobs/{seeded.ids['ready']}/cancel", {}),
        ("/actions/schedules", {"name": "prg", "spec": "@every 1h", "queue": "reports", "payload": ""}),
        ("/actions/fire/prg", {}),
        ("/actions/unschedule/prg", {}),
    ]
    for path, form in actions:
        acted = client.post(path, data={CSRF_FIELD: token, **form}, follow_redirects=False)
        assert acted.status_code == 303, path
        assert acted.headers["location"].startswith("/done?message="), path
    before = served.call(served.store.queue_stats, "reports")[0].ready
    fired = client.post("/actions/fire/nightly-digest", data={CSRF_FIELD: token}, follow_redirects=False)
    page = client.get(fired.headers["location"])
    assert "Fired nightly-digest now" in page.text
    assert client.get(fired.headers["location"]).text == page.text  # a reload says it again, and does nothing
    assert served.call(served.store.queue_stats, "reports")[0].ready == before + 1


def test_the_done_page_says_only_what_the_dashboard_signed(served: Served) -> None:
    client = served.client()
    forged = client.get("/done", params={"message": "Your session expired: log in at evil.example", "back": "/"})
    assert forged.status_code == 400
    assert "evil.example" not in forged.text
    token = csrf_of(client, "/schedules")
    location = client.post("/actions/pause/emails", data={CSRF_FIELD: token}, follow_redirects=False).headers[
        "location"
    ]
    assert client.get(location).status_code == 200
    assert client.get(location.replace("Paused", "Purged")).status_code == 400
    assert served.client().get(location).status_code == 400  # another dashboard (secret) never said it


def test_failed_logins_are_rate_limited_per_client_address() -> None:
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    token = "the-right-token-of-32-characters"
    with alkstore.open("memory://", clock=clock) as store:
        app = create_app(store, token=token)
        guesser = TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.7", 50000))
        answers = [guesser.get("/", auth=("admin", f"guess-{n}")).status_code for n in range(300)]
        assert answers[:LOGIN_FAILURES] == [401] * LOGIN_FAILURES  # the 300 guesses that took 0.38 s
        assert set(answers[LOGIN_FAILURES:]) == {429}
        throttled = guesser.get("/", auth=("admin", token))  # the right token too: guessing on learns nothing
        assert throttled.status_code == 429
        assert throttled.headers["retry-after"] == str(int(LOGIN_WINDOW))
        assert "too many failed logins from 10.0.0.7" in throttled.text
        neighbour = TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.8", 50000))
        assert neighbour.get("/", auth=("admin", token)).status_code == 200  # another address is not held back
        assert neighbour.get("/").status_code == 401  # a browser's first, credential-less request counts for nothing
        clock.advance(LOGIN_WINDOW - 1)
        assert guesser.get("/", auth=("admin", token)).headers["retry-after"] == "1"
        clock.advance(1)
        assert guesser.get("/", auth=("admin", token)).status_code == 200
        assert guesser.get("/", auth=("admin", "one more guess")).status_code == 401


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    now = [0.0]
    throttle = LoginThrottle(lambda: now[0], limit=2, window=60, capacity=3)
    for address in ("a", "a", "b", "c", "d"):
        throttle.failed(address)
    assert throttle.wait("a") == 0  # forgotten: its latest failure was the oldest when "d" came
    throttle.failed("d")
    assert throttle.wait("d") == 60
    now[0] = 30.0
    assert throttle.wait("d") == 30


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "invoice" RLO "fdp.exe" reads "invoiceexe.pdf"
MISLEADING = f"invoice{RLO}fdp.exe"


async def seed_misleading(store: alkstore.AsyncStore) -> int:
    """A dead job whose payload and error hold bidirectional controls (names refuse them), and a worker's host."""
    queue = store.queue("files")
    job_id = await queue.enqueue({"file": MISLEADING, "note": "\u2067isolated\u2069"}, EnqueueOpts(max_attempts=1))
    job = await queue.claim("w1")
    assert job is not None
    await job.fail(f"cannot open {MISLEADING}")
    now = store.clock.now()
    await store.engine.record_worker(WorkerRecord("w1", f"host-{MISLEADING}", 1, ("files",), 1, now, now), [])
    return job_id


def test_bidirectional_controls_show_spelled_out_wherever_user_text_is_shown(served: Served) -> None:
    job_id = served.call(seed_misleading, served.store)
    client = served.client()
    token = csrf_of(client)
    bulk = {CSRF_FIELD: token, "action": "purge", "id": str(job_id), "what": MISLEADING}
    schedule = {CSRF_FIELD: token, "name": MISLEADING, "spec": "@every 1h", "queue": "q", "payload": MISLEADING}
    pages = {
        "overview": client.get("/"),
        "queue": client.get("/queues/files", params={"state": "dead"}),
        "job": client.get(f"/jobs/{job_id}"),
        "dead": client.get("/dead"),
        "confirm": client.post("/actions/dead", data=bulk),
        "refused": client.post("/actions/schedules", data=schedule),
        "filter": client.get("/queues/files", params={"state": "dead", "task": MISLEADING}),
    }
    for name, page in pages.items():
        assert page.status_code in {200, 400}, name
        assert BIDI_CONTROLS.isdisjoint(page.text), name
        assert "invoice&lt;U+202E&gt;fdp.exe" in page.text, name
    assert "&lt;U+2067&gt;isolated&lt;U+2069&gt;" in pages["job"].text


def test_a_warning_shows_at_the_top_of_every_page(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client(warning="No authentication: anyone who can reach 0.0.0.0:8080 can requeue")
    for path in ("/", "/dead", "/schedules", "/queues/emails", f"/jobs/{seeded.ids['dead']}", "/jobs/999999"):
        page = client.get(path).text
        assert '<p class="warning" id="warning" role="alert">No authentication: anyone' in page, path
    assert 'class="warning"' not in served.client().get("/").text
