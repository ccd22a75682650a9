"""OpenTelemetry traces of Kafka streams: optional, off unless ``SLUICE_TRACING`` is set and the SDK is installed.

Each stream of an ``sse-kafka`` route is one span (kind CONSUMER, named ``receive <topic>``)
with the messaging attributes of OpenTelemetry's semantic conventions, open while the
stream is. A record a producer traced carries a W3C ``traceparent`` header; for every
``TRACING_LINK_EVERY``-th such record (by offset) the span of each stream it was
delivered to gets a link to the producer's span, so a trace viewer goes from the
producer's send to the streams that took it.

This module is imported only when traces are on. With them off the hub has no
:class:`~streams.fanout.state.BatchWatch` and the fan-out pays one test per batch;
with them on, the work is per batch and per sampled record, never per frame. The
exporter is the SDK's OTLP one when ``opentelemetry-exporter-otlp`` is installed,
configured, as the SDK does, from the standard ``OTEL_*`` variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``...).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

from streams.conf import streams_settings
from streams.core.records import Record

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer

    from streams.edge.streaming.kafka_stream import HubStream
    from streams.fanout.kafka import PartitionEnd
    from streams.fanout.state import HubState
    from streams.fanout.subscriber import Subscriber

logger = logging.getLogger("sluice.tracing")

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - an optional install (requirements-dev.txt pins it)
    trace = None  # type: ignore[assignment]

TRACEPARENT = "traceparent"


class HubTraces:
    """The spans of one hub's traced streams, linked to the producers of sampled records."""

    __slots__ = ("tracer", "every", "spans")

    def __init__(self, tracer: Tracer, every: int) -> None:
        self.tracer = tracer
        self.every = max(1, every)
        self.spans: dict[Subscriber, Span] = {}

    def stream_start(self, topic: str, route: str, sub: Subscriber) -> Span:
        """Open the span of one stream; it ends when the stream does."""
        span = self.tracer.start_span(
            f"receive {topic}",
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "receive",
                "messaging.operation.name": "receive",
                "messaging.destination.name": topic,
                "messaging.client.id": f"sluice-{os.getpid()}",
                # Sluice reads every partition itself (no consumer group): the route names the consumer.
                "messaging.consumer.group.name": route,
                "sluice.route": route,
            },
        )
        self.spans[sub] = span
        sub.on_end(functools.partial(self._stream_end, sub))
        return span

    def _stream_end(self, sub: Subscriber) -> None:
        span = self.spans.pop(sub, None)
        if span is not None:
            span.set_attribute("sluice.events", sub.events)
            if sub.close_reason:
                span.set_attribute("sluice.close_reason", sub.close_reason)
            span.end()

    def batch(self, state: HubState, batch: list[Record | PartitionEnd]) -> None:
        """Link the sampled, traced records of a batch to the spans of the live streams they went to."""
        spans = self.spans
        if not spans:
            return
        every = self.every
        for item in batch:
            if not isinstance(item, Record) or not item.headers or item.offset % every:
                continue
            producer = traceparent_context(item.headers)
            if producer is None:
                continue
            attributes: dict[str, str | int] = {
                "messaging.destination.partition.id": str(item.partition),
                "messaging.kafka.offset": item.offset,
            }
            for sub, span in spans.items():
                if sub.is_live and sub.filters.matches(item.match_key, item.headers):
                    span.add_link(producer, attributes)


def traceparent_context(headers: tuple[tuple[str, bytes | None], ...]) -> SpanContext | None:
    """The producer's span context from a record's ``traceparent`` header (None if absent or malformed)."""
    for name, value in headers:
        if name.lower() == TRACEPARENT and value:
            carrier = {TRACEPARENT: value.decode("latin-1")}
            context = trace.get_current_span(TraceContextTextMapPropagator().extract(carrier)).get_span_context()
            return context if context.is_valid else None
    return None


@functools.cache
def sluice_tracer() -> Tracer | None:
    """The process's tracer: the SDK's, set up once with the OTLP exporter if installed (None without the SDK)."""
    if trace is None:
        logger.warning("SLUICE_TRACING is set but opentelemetry is not installed: no traces")
        return None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # Nothing configured tracing in this process: the SDK, from the OTEL_* variables.
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "sluice"}))
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning("opentelemetry-exporter-otlp is not installed: spans are made but not exported")
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    return trace.get_tracer("sluice")


def stream_trace(source: HubStream, tracer: Tracer | None = None) -> None:
    """Give a started Kafka stream its span (its hub watches batches from now on)."""
    tracer = tracer or sluice_tracer()
    if tracer is None or source.sub is None:
        return
    state = source.hub.state
    traces = state.watch
    if not isinstance(traces, HubTraces):
        traces = state.watch = HubTraces(tracer, streams_settings.TRACING_LINK_EVERY)
    traces.stream_start(state.topic, source.route.pattern.source, source.sub)
