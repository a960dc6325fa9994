"""docs/telemetry.md's Prometheus example runs as written (its URL and port replaced) and serves the names its table
gives, on ``/metrics``."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.prometheus", reason="the Prometheus example needs the test extra")

import alkstore
from tests._docs import ROOT, block, run_script

pytestmark = pytest.mark.postgres

PAGE = "docs/telemetry.md"

#: What the test adds after the example: some work, then one scrape of the endpoint, printed.
SCRAPE = """
import urllib.request

emails = store.queue("emails")
emails.enqueue({"to": "ada@example.com"})
emails.claim("worker-1").ack()
emails.enqueue({"to": "bob@example.com"})  # left ready: the gauges have a queue to show
print(urllib.request.urlopen("http://127.0.0.1:PORT/metrics", timeout=30).read().decode())
store.close()
meter_provider.shutdown()
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def documented_names() -> dict[str, str]:
    """The page's table: OpenTelemetry name -> Prometheus name."""
    text = (ROOT / PAGE).read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `(alkstore\.[\w.]+)` \| `(alkstore_\w+)` \|", text, re.MULTILINE))


def test_the_prometheus_example_serves_the_documented_names(pg_database: str, tmp_path: Path) -> None:
    example = block(PAGE, "PrometheusMetricReader()")
    documented_url, documented_port = '"postgresql://app@db/app"', "9464"
    assert documented_url in example
    assert f"start_http_server({documented_port})" in example
    port = str(free_port())
    alkstore.open(pg_database, migrate=True, max_size=1).close()
    edited = example.replace(documented_url, repr(pg_database)).replace(documented_port, port)
    edited += SCRAPE.replace("PORT", port)

    result = run_script(edited, tmp_path, "prometheus_example.py", warnings_as_errors=False)

    served = {line.split("{")[0].split(" ")[0] for line in result.stdout.splitlines() if not line.startswith("#")}
    names = documented_names()
    assert len(names) == 10, names
    for otel_name in (
        "alkstore.jobs.enqueued",
        "alkstore.jobs.claimed",
        "alkstore.jobs.acked",
        "alkstore.jobs.queue_wait",
        "alkstore.queue.depth",
        "alkstore.queue.lag",
    ):
        prometheus = names[otel_name]
        assert {prometheus, f"{prometheus}_count"} & served, (prometheus, sorted(served))
