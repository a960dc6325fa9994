"""The locks page: every held lock with its owner, token and lease end, escaped, a page at a time (every engine)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

import alkstore.adapters.web._listing
from alkstore import ManualClock
from alkstore.testing import Scratch
from tests.web.conftest import Served, serve
from tests.web.test_pages import text

T0 = datetime(2030, 1, 1, 12, tzinfo=UTC)
#: A lock name and an owner that would be markup if a page wrote them out unescaped.
HOSTILE = "<script>alert('lock')</script>"
OWNER = '"><img src=x onerror=alert(1)>'


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def timed(scratch: Scratch, clock: ManualClock) -> Iterator[Served]:
    """A fresh store of each engine on a ManualClock, its dashboard's clients on its loop."""
    yield from serve(scratch, clock)


def listed(page: str) -> list[str]:
    """The lock names of a locks page's rows, in order."""
    return [html.unescape(name) for name in re.findall(r'<tr data-lock="([^"]*)">', page)]


def test_a_held_lock_is_listed_with_its_owner_token_and_lease_end_until_released_or_lapsed(
    timed: Served, clock: ManualClock
) -> None:
    store = timed.store
    client = timed.client()
    assert "No lock is held." in text(client.get("/locks").text)
    reports = timed.call(store.try_lock, "reports", "host-a:1", 30)
    lapsing = timed.call(store.try_lock, "lapsing", "host-b:2", 10)
    assert reports is not None
    assert lapsing is not None
    page = client.get("/locks")
    assert page.status_code == 200
    assert listed(page.text) == ["lapsing", "reports"]
    row = text(page.text.split('<tr data-lock="reports">')[1].split("</tr>")[0])
    assert row == f"reports host-a:1 {reports.token} 2030-01-01 12:00:30 UTC (in 30.0s)"
    assert timed.call(reports.release) is True
    assert listed(client.get("/locks").text) == ["lapsing"]
    clock.advance(10)  # the lease ends: not held, though still stored until taken or released
    assert listed(client.get("/locks").text) == []


def test_names_and_owners_are_escaped(served: Served) -> None:
    assert served.call(served.store.try_lock, HOSTILE, OWNER, 60) is not None
    page = served.client().get("/locks").text
    assert HOSTILE not in page
    assert OWNER not in page
    assert listed(page) == [HOSTILE]
    assert f"{HOSTILE} {OWNER}" in text(page)


def test_the_locks_page_lists_a_page_at_a_time_by_name(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alkstore.adapters.web._listing, "LOCKS_PAGE", 2)
    names = ["b & c", "a/b?c", "Zed", "é"]
    for name in names:
        assert served.call(served.store.try_lock, name, "owner", 60) is not None
    client = served.client()
    seen: list[str] = []
    path: str | None = "/locks"
    while path is not None:
        page = client.get(path)
        assert page.status_code == 200
        seen.extend(listed(page.text))
        found = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        path = html.unescape(found.group(1)) if found else None
    assert seen == sorted(names)
    assert client.get("/locks?after=" + "x" * 129).status_code == 400


def test_the_nav_and_the_overview_link_to_the_locks_page(served: Served) -> None:
    client = served.client()
    assert '<a href="/locks" aria-current="page">Locks</a>' in client.get("/locks").text
    overview = client.get("/").text
    assert '<a href="/locks">Locks</a>' in overview
    assert '<a class="more" href="/locks">' in overview
