"""The streams app's settings and their defaults: ``from streams.conf import streams_settings``.

Values come from ``settings.SLUICE`` (filled from the environment by
``project/settings.py``; the README lists the variables).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.conf import app_settings


@dataclass(frozen=True)
class StreamsSettings:
    # Kafka bootstrap servers; empty means `runstreams` starts the embedded broker.
    KAFKA_BOOTSTRAP_SERVERS: str = ""
    # librdkafka properties of the default cluster, from KAFKA_<NAME> variables (as ${env.KAFKA_<NAME>} references).
    KAFKA_PROPERTIES: dict[str, str] = field(default_factory=dict)
    # Seconds a new stream waits for topic metadata before answering 503.
    KAFKA_TIMEOUT: float = 5.0
    # Seconds the route table is reused before it is read again from the database.
    ROUTE_CACHE_SECONDS: float = 1.0
    # When a fetch brings many records (the topic is busy), how long the fetcher waits for more to
    # batch (bounds the latency it adds; larger batches mean fewer writes per client). A fetch
    # that brings one record or a few is sent at once.
    FETCH_LINGER_MS: float = 5.0
    # fetch.wait.max.ms of the live fetchers; 0 fits it to the broker (1 ms for brokers that hold a
    # waiting fetch to its end, like the embedded tansu; 100 ms for Kafka, which answers at once).
    FETCH_WAIT_MS: float = 0.0
    # How often each topic is asked whether it gained partitions (new ones are read from their start).
    METADATA_REFRESH_SECONDS: float = 30.0
    # A topic with no open stream for this long releases its consumer and cache.
    HUB_IDLE_SECONDS: float = 300.0
    # Concurrent catch-up reads from Kafka (resumes older than the cache) per worker.
    BACKLOG_READERS: int = 4
    # Open streams one client address may hold in one worker process (429 past it); 0 means no limit.
    MAX_STREAMS_PER_ADDRESS: int = 200
    # On SIGTERM, how long open streams and their connections get to end cleanly before the process exits.
    SHUTDOWN_SECONDS: float = 5.0
    # On SIGTERM, the window over which open streams are ended in waves, each first told a randomized
    # `retry:` so browsers come back spread out (docs/operations.md, "Rolling deploys"). Taken within
    # SHUTDOWN_SECONDS: at most SHUTDOWN_SECONDS less one second; 0 ends every stream at once.
    DRAIN_SECONDS: float = 3.0
    # New streams one worker admits per second (a token bucket, bursts of one second's worth); past it a
    # 503 with retry-after. 0 means no limit.
    ADMISSIONS_PER_SECOND: float = 0.0
    # How long a stream asked by an EventSource is held (200, heartbeats) while Kafka does not answer,
    # before it ends cleanly so the browser reconnects; 0 answers 503 at once instead.
    UNAVAILABLE_HOLD_SECONDS: float = 30.0
    # Streams one worker holds that way at most (past it they end at once; browsers come back).
    MAX_WAITING_STREAMS: int = 1000
    # Origins (scheme://host[:port], or "*") a route allows when its own allow_origins is empty; a route
    # that lists origins allows those alone (docs/embedding.md, "CORS"). From SLUICE_CORS_ALLOW_ORIGINS.
    CORS_ALLOW_ORIGINS: tuple[str, ...] = ()
    # Brotli-compressed streams one worker holds at most, resting or not (one event can wake them all: a
    # writing one holds 300-720 KB of compressor tables, a resting one about 1 KB); past it, clients that
    # accept gzip get gzip. docs/operations.md, "Compression".
    BROTLI_MAX_STREAMS: int = 1000
    # OpenTelemetry traces of Kafka streams (needs opentelemetry-sdk installed; exporter settings from the
    # standard OTEL_* variables). docs/operations.md, "Traces".
    TRACING: bool = False
    # With traces on, a stream's span links every Nth record's producer span (by offset), from its traceparent.
    TRACING_LINK_EVERY: int = 10
    # The event loop under Twisted's asyncio reactor: asyncio or uvloop.
    EVENT_LOOP: str = "asyncio"


streams_settings = app_settings(StreamsSettings)
