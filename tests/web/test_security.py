"""The attacks the dashboard's security layer stops (ADR 060), each made as it was found, with an HTTP client."""

from __future__ import annotations

import pytest

from alkstore.adapters.web import CSRF_FIELD
from alkstore.adapters.web._security import AllowedHosts, allowed_hosts
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
