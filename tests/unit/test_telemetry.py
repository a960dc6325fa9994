"""The telemetry port (``alkstore.telemetry``): a no-op base, checked where a store takes it, and free when absent."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import AsyncStore, InvalidOptions, ManualClock, Store
from alkstore.engine import JobRecord, JobState
from alkstore.telemetry import Telemetry
from tests.support import MIDNIGHT, run_probe


class Recording(Telemetry):
    """A telemetry that notes each event it is told of, by name."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def opened(self, store: Store | AsyncStore) -> None:
        self.events.append(("opened", store))

    def closed(self, store: Store | AsyncStore) -> None:
        self.events.append(("closed", store))

    def acked(self, jobs: Any) -> None:
        self.events.append(("acked", [job.id for job in jobs]))


def test_the_base_telemetry_does_nothing_and_leaves_every_call_as_it_was() -> None:
    with alkstore.open("memory://", clock=ManualClock(MIDNIGHT), telemetry=Telemetry()) as store:
        queue = store.queue("q")
        first, second = queue.enqueue_many([1, 2])
        job = queue.claim("w")
        assert job is not None
        assert job.id == first
        job.retry("again", delay=0)
        assert [job.id for job in queue.claim_many("w", 2)] == [first, second]
    base = Telemetry()
    with base.enqueue("q", None, 1) as trace:
        assert trace is None
    with base.run(_record(), ManualClock(MIDNIGHT)) as report:
        report.refused("why not")  # the base records nothing, and the run goes on
    with pytest.raises(ZeroDivisionError), base.run(_record(), ManualClock(MIDNIGHT)):
        raise ZeroDivisionError  # a run's exception passes through


def test_a_subclass_overrides_only_what_it_reports() -> None:
    telemetry = Recording()
    with alkstore.open("memory://", telemetry=telemetry) as store:
        queue = store.queue("q")
        queue.enqueue(1)
        job = queue.claim("w")
        assert job is not None
        job.ack()
    assert telemetry.events == [("opened", store), ("acked", [job.id]), ("closed", store)]


@pytest.mark.parametrize("bad", [object(), "otel", Telemetry])
def test_open_and_store_refuse_a_telemetry_that_is_not_one(bad: object) -> None:
    with pytest.raises(InvalidOptions, match=r"telemetry must be an alkstore\.telemetry\.Telemetry"):
        alkstore.open("memory://", telemetry=bad)  # type: ignore[arg-type]
    with alkstore.open("memory://") as store, pytest.raises(InvalidOptions, match="telemetry must be"):
        Store(store.engine, telemetry=bad)  # type: ignore[arg-type]


def _record() -> JobRecord:
    return JobRecord(
        1, "q", b"1", JobState.RUNNING, 0, MIDNIGHT, None, 1, 3, None, None, None, MIDNIGHT, "w", None, None, 1
    )


# -- nothing imported, nothing called, without telemetry ------------------------------------------

_WITHOUT_TELEMETRY = textwrap.dedent(
    """
    import json, sys, threading

    attempts = []

    class BlockOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                attempts.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, BlockOpenTelemetry())

    import alkstore
    from alkstore import StopToken, Tasks, Worker

    tasks = Tasks()
    ran = []

    @tasks.task("add", queue="q")
    def add(n):
        ran.append(n)

    with alkstore.open("memory://") as store:
        add.enqueue(store, n=1)
        add.enqueue_many(store, [{"n": 2}, {"n": 3}])
        store.queue("plain").enqueue("x")
        job = store.queue("plain").claim("w")
        job.retry("again", delay=0)
        store.queue("plain").claim("w").fail("no")
        store.schedule("s", "@every 1s", "q")
        store.tick()
        worker = Worker(store, tasks, poll_interval=0.02)
        stop = StopToken()
        thread = threading.Thread(target=worker.run, args=(stop,))
        thread.start()
        while worker.stats.succeeded < 3 and thread.is_alive():
            stop.wait(0.01)
        stop.cancel()
        thread.join(60)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
    before_probe = list(attempts)
    try:
        import opentelemetry.trace
    except ImportError:
        probe_blocked = True
    else:
        probe_blocked = False
    print(json.dumps({"ran": sorted(ran), "attempts": before_probe, "loaded": loaded, "probe_blocked": probe_blocked}))
    """
)


def test_without_telemetry_no_opentelemetry_module_is_imported(tmp_path: Path) -> None:
    report = run_probe(_WITHOUT_TELEMETRY, tmp_path)
    assert report["probe_blocked"], "the blocker did not work, so this test proves nothing"
    assert report["ran"] == [1, 2, 3]
    assert report["attempts"] == [], "alkstore tried to import opentelemetry without telemetry"
    assert report["loaded"] == []
