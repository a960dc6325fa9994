"""The dashboard over a sync ``Store``: its calls run on worker threads, pages and actions as over an async one."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

import alkstore
from alkstore.adapters.web import CSRF_FIELD, create_app


def test_a_sync_store_serves_every_page_and_action() -> None:
    with alkstore.open("memory://") as store:
        queue = store.queue("orders")
        ids = queue.enqueue_many([{"customer": 42}, {"customer": 7}, {"customer": 42}])
        job = queue.claim("w1")
        assert job is not None
        job.fail("card declined")
        store.schedule("digest", "@every 1h", "orders", {"kind": "digest"})
        store.outbox("hooks").enqueue({"event": "paid"})
        held = store.try_lock("nightly-report", "host-a:1", 60)
        assert held is not None
        client = TestClient(create_app(store), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"})
        pages = ["/", "/fragments/overview", "/dead", "/schedules", f"/jobs/{ids[0]}", "/workers", "/outboxes/hooks"]
        pages += ["/results/orders", "/fragments/counts/orders", "/dead?queue=orders", "/locks", "/actions"]
        for path in pages:
            assert client.get(path).status_code == 200, path
        assert re.findall(r'<tr data-lock="([^"]+)">', client.get("/locks").text) == ["nightly-report"]
        (group,) = re.findall(r'<tr class="group" data-key="(\w+)">', client.get("/dead").text)
        assert client.get("/dead/group", params={"queue": "orders", "key": group}).status_code == 200
        page = client.get("/queues/orders", params={"contains": '{"customer": 42}', "order": "reversed"}).text
        assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page)] == [ids[2]]
        (token,) = set(re.findall(rf'name="{CSRF_FIELD}" value="([^"]+)"', page))
        assert "Paused orders" in client.post("/actions/pause/orders", data={CSRF_FIELD: token}).text
        assert store.queue_stats("orders")[0].paused
        fired = client.post("/actions/fire/digest", data={CSRF_FIELD: token}).text
        assert "Fired digest now" in fired
        confirmed = {CSRF_FIELD: token, "action": "purge", "id": str(ids[0]), "confirmed": "yes"}
        assert "Purged 1 jobs." in client.post("/actions/dead", data=confirmed).text
        assert store.get_job(ids[0]) is None
