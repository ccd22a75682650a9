"""Traces: a stream's span, linked to the span of the producer that wrote a record's ``traceparent``.

The hub is driven in process (Kafka faked: records handed in, as in tests/streams/fanout/test_hub.py)
and spans go to the SDK's in-memory exporter. The producer side is what an instrumented producer
does: a PRODUCER span, its context injected into the record's headers by the W3C propagator.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streams.core.closing import CloseReason
from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.edge.streaming.tracing import HubTraces, stream_trace, traceparent_context
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub


@pytest.fixture
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return SimpleNamespace(exporter=exporter, tracer=provider.get_tracer("tests"))


def produced(tracer: Any, partition: int, offset: int, key: bytes = b"k") -> tuple[Record, Any]:
    """A record as a traced producer writes it: its send span's context in ``traceparent``."""
    with tracer.start_as_current_span("send scores", kind=SpanKind.PRODUCER) as span:
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
    headers = [(name, value.encode()) for name, value in carrier.items()]
    return Record(partition, offset, 0, key, b'{"score": 1}', headers), span.get_span_context()


def hub_stream(hub: Any, route: str, filters: FilterSet | None = None) -> Any:
    sub = Subscriber(FakeSink(), SubscriberOptions(filters=filters or FilterSet(), route=route))
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    pattern = SimpleNamespace(source=route)
    return SimpleNamespace(hub=hub, sub=sub, route=SimpleNamespace(pattern=pattern))


async def test_the_stream_span_links_the_producer_span_of_a_record_it_delivered(spans) -> None:
    hub = make_hub(topic="scores")
    everyone = hub_stream(hub, "/scores")
    others = hub_stream(hub, "/scores/{key}", FilterSet((MessageFilter(key=b"other"),)))
    stream_trace(everyone, spans.tracer)
    stream_trace(others, spans.tracer)
    record, producer = produced(spans.tracer, partition=1, offset=0)
    feed(hub, record, Record(0, 0, 0, b"k", b"untraced"))
    for stream in (everyone, others):
        hub.unsubscribe(stream.sub)
        stream.sub.end(CloseReason.CLIENT)
    await asyncio.sleep(0)  # the spans end on the loop, as the streams' end callbacks run

    finished = {
        span.attributes["sluice.route"]: span
        for span in spans.exporter.get_finished_spans()
        if span.kind is SpanKind.CONSUMER
    }
    span = finished["/scores"]
    assert span.name == "receive scores"
    assert span.attributes["messaging.system"] == "kafka"
    assert span.attributes["messaging.destination.name"] == "scores"
    assert span.attributes["messaging.operation.type"] == "receive"
    assert span.attributes["sluice.events"] == 2
    [link] = span.links
    assert (link.context.trace_id, link.context.span_id) == (producer.trace_id, producer.span_id)
    assert link.attributes["messaging.destination.partition.id"] == "1"
    assert link.attributes["messaging.kafka.offset"] == 0
    # The filtered stream did not get the record: no link.
    assert finished["/scores/{key}"].links == ()


def test_sampling_keeps_every_nth_offset_and_bad_headers_are_ignored(spans) -> None:
    traces = HubTraces(spans.tracer, every=2)
    assert traces.every == 2
    assert traceparent_context((("traceparent", b"not-a-traceparent"),)) is None
    assert traceparent_context((("other", b"x"),)) is None
    record, producer = produced(spans.tracer, 0, 3)
    assert record.headers is not None
    context = traceparent_context(record.headers)
    assert context is not None
    assert context.trace_id == producer.trace_id


def test_with_traces_off_nothing_of_opentelemetry_is_imported() -> None:
    """The stream app, a hub and a fan-out, as runstreams imports them: OpenTelemetry stays out of the process."""
    code = (
        "import sys, django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings_test'); "
        "django.setup(); import streams.edge.app, streams.edge.streaming.stream, streams.fanout.ingest; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
