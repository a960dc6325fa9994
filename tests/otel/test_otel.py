"""The OpenTelemetry adapter's own edges: trace contexts it cannot use, and the global providers."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel tests need opentelemetry-sdk (the test extra)")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider

import alkstore
from alkstore import EnqueueOpts, ManualClock, Store
from alkstore.adapters import otel
from alkstore.adapters.otel import Telemetry, _telemetry
from alkstore.engine import JobRecord, NewJob
from alkstore.store._kernel import kernel_of
from tests.support import MIDNIGHT


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(exporter: InMemorySpanExporter) -> Iterator[Store]:
    """A memory store whose spans end in ``exporter``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with alkstore.open(
        "memory://", clock=ManualClock(MIDNIGHT), telemetry=Telemetry(tracer_provider=provider)
    ) as store:
        yield store
    provider.shutdown()


def run_one(store: Store, queue: str) -> str | None:
    """Claim one job of ``queue`` and run it the way a worker does, through the store's telemetry."""
    job = store.queue(queue).claim("w")
    assert job is not None
    kernel = kernel_of(store)
    assert kernel.telemetry is not None
    with kernel.telemetry.run(kernel.record_of(job), store.clock):
        return None


@pytest.mark.parametrize(
    "trace",
    [
        None,
        "",
        "nonsense",
        "00-00000000000000000000000000000000-0000000000000000-01",  # the all-zero ids are invalid
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # a field short
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333x-01",  # not hex
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # a version this reader does not know
        "00-0af7651916cd43dd8448eb211c80319c0-b7ad6b716920333-01",  # fields of the wrong lengths
    ],
)
def test_a_job_without_a_usable_trace_context_runs_in_a_span_without_a_link(
    traced: Store, exporter: InMemorySpanExporter, trace: str | None
) -> None:
    now = traced.clock.now()
    traced.engine.enqueue([NewJob("q", b"1", 0, now, None, 3, trace=trace)], now)

    assert run_one(traced, "q") is None

    (span,) = exporter.get_finished_spans()
    assert span.name == "process q"
    assert span.links == ()


def test_a_job_carrying_another_systems_traceparent_links_to_it(traced: Store, exporter: InMemorySpanExporter) -> None:
    now = traced.clock.now()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced.engine.enqueue([NewJob("q", b"1", 0, now, None, 3, trace=parent)], now)

    run_one(traced, "q")

    (span,) = exporter.get_finished_spans()
    (link,) = span.links
    assert (link.context.trace_id, link.context.span_id) == (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)


def test_without_an_sdk_the_global_providers_record_nothing_and_jobs_carry_no_trace() -> None:
    # The OpenTelemetry API alone (no SDK configured globally) makes no-op spans: nothing to carry.
    seen: list[Any] = []
    with alkstore.open("memory://", telemetry=Telemetry(queue_depth=False)) as store:
        queue = store.queue("q")
        queue.enqueue(1)
        job = queue.claim("w")
        assert job is not None
        seen.append(job._record.trace)
        job.ack()
    assert seen == [None]


def _always_off() -> TracerProvider:
    return TracerProvider(sampler=ALWAYS_OFF)


@pytest.mark.parametrize(
    ("provider", "spans"),
    [
        pytest.param(_always_off, 0, id="sdk-sampler-drops-every-span"),
        pytest.param(NoOpTracerProvider, 0, id="api-no-op"),
        pytest.param(lambda: None, 0, id="global-without-an-sdk"),
        pytest.param(TracerProvider, 3, id="sdk-recording"),  # the control: two sends and a process span
    ],
)
def test_no_span_and_no_span_attributes_are_built_when_no_tracer_would_record(
    monkeypatch: pytest.MonkeyPatch, provider: Callable[[], TracerProvider | None], spans: int
) -> None:
    started: list[str] = []
    built: list[str] = []

    def counted(start: Callable[..., Any]) -> Callable[..., Any]:
        def start_span(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            started.append(name)
            return start(self, name, *args, **kwargs)

        return start_span

    for tracer in (SdkTracer, trace.NoOpTracer, trace.ProxyTracer):
        monkeypatch.setattr(tracer, "start_span", counted(tracer.start_span))
    attributes = _telemetry._run_attributes

    def run_attributes(job: JobRecord) -> dict[str, str | int]:
        built.append(job.queue)
        return attributes(job)

    monkeypatch.setattr(_telemetry, "_run_attributes", run_attributes)
    reader = InMemoryMetricReader()
    telemetry = Telemetry(meter_provider=MeterProvider([reader]), tracer_provider=provider(), queue_depth=False)

    with alkstore.open("memory://", clock=ManualClock(MIDNIGHT), telemetry=telemetry) as store:
        store.queue("q").enqueue(1)
        traces = [store.queue("q").claim("w")._record.trace]  # type: ignore[union-attr]
        store.queue("q").enqueue(2)
        run_one(store, "q")

    assert len(started) == spans
    assert len(built) == (1 if spans else 0)
    assert (traces[0] is None) == (spans == 0)
    data = reader.get_metrics_data()
    assert data is not None
    (scope,) = data.resource_metrics[0].scope_metrics
    measured = {metric.name: metric.data.data_points[0] for metric in scope.metrics}
    enqueued, ran = measured[otel.ENQUEUED], measured[otel.RUN_DURATION]
    assert isinstance(enqueued, NumberDataPoint)
    assert isinstance(ran, HistogramDataPoint)
    assert (enqueued.value, ran.count) == (2, 1)  # metrics are kept whatever the tracer records


def _queue_waits(reader: InMemoryMetricReader) -> tuple[int, float]:
    """The queue-wait histogram's count and sum, as a collection now reads them."""
    data = reader.get_metrics_data()
    assert data is not None
    (scope,) = data.resource_metrics[0].scope_metrics
    (point,) = next(metric for metric in scope.metrics if metric.name == otel.QUEUE_WAIT).data.data_points
    assert isinstance(point, HistogramDataPoint)
    return point.count, point.sum


def test_every_kept_measurement_reaches_each_collection_and_none_twice_however_threads_interleave() -> None:
    """The histograms keep measurements and hand them over in batches (ADR 051): a collection sees
    every one recorded before it, even fewer than a batch, and threads recording while others
    collect lose none and double none."""

    reader = InMemoryMetricReader()
    telemetry = Telemetry(meter_provider=MeterProvider([reader]), queue_depth=False)
    clock = ManualClock(MIDNIGHT)
    with alkstore.open("memory://", clock=clock, telemetry=telemetry) as store:
        store.queue("q").enqueue(1)
        clock.advance(2)
        job = store.queue("q").claim("w")
        assert job is not None
        record = kernel_of(store).record_of(job)
    later = clock.now()
    telemetry.claimed([record] * 2, later)
    assert _queue_waits(reader) == (3, 6.0), "fewer than a batch: handed over at the collection"

    threads, per_thread = 4, 3 * _telemetry.BATCH + 7
    done = threading.Event()

    def claims() -> None:
        for _ in range(per_thread):
            telemetry.claimed([record], later)

    def collections() -> None:
        while not done.is_set():
            reader.get_metrics_data()

    collector = threading.Thread(target=collections)
    workers = [threading.Thread(target=claims) for _ in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch every few bytecodes: a hand-over that can lose one, does
    try:
        collector.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        done.set()
        collector.join()
    finally:
        sys.setswitchinterval(interval)
    assert _queue_waits(reader) == (3 + threads * per_thread, 2.0 * (3 + threads * per_thread))


def test_a_job_enqueued_after_parents_links_its_enqueue_to_each_parents_trace(
    traced: Store, exporter: InMemorySpanExporter
) -> None:
    first = traced.queue("a").enqueue({"n": 1})
    second = traced.queue("b").enqueue({"n": 2})
    exporter.clear()
    traced.queue("d").enqueue({"n": 4}, EnqueueOpts(after=[first, second]))
    (send,) = [span for span in exporter.get_finished_spans() if span.name == "send d"]
    parents = [traced.get_job(first), traced.get_job(second)]
    wanted = {job.trace.split("-")[1] for job in parents if job is not None and job.trace is not None}
    assert len(wanted) == 2
    assert {f"{link.context.trace_id:032x}" for link in send.links} == wanted
    exporter.clear()
    traced.queue("e").enqueue({"n": 5})
    (alone,) = [span for span in exporter.get_finished_spans() if span.name == "send e"]
    assert not alone.links


def test_a_graph_waiting_on_stored_jobs_links_its_enqueue_to_their_traces(
    traced: Store, exporter: InMemorySpanExporter
) -> None:
    stored = traced.queue("a").enqueue({"n": 1})
    parent = traced.get_job(stored)
    assert parent is not None
    assert parent.trace is not None
    exporter.clear()
    graph = traced.graph()
    graph.add("one", "b", {"n": 2}, after=[stored])
    graph.add("two", "c", {"n": 3}, after=["one", stored])
    traced.enqueue_graph(graph)
    (send,) = [span for span in exporter.get_finished_spans() if span.name.startswith("send ")]
    assert [f"{link.context.trace_id:032x}" for link in send.links] == [parent.trace.split("-")[1]]
