"""Chromium's own EventSource over compressed streams: every event arrives as it is produced.

The page opens an EventSource on the gateway (same origin); the test produces events at
100 msg/s, each carrying its produce time, and the page records when each arrives.
Delivery is asserted; the latencies are printed for docs/operations.md ("Compression"),
never asserted (the machine is shared).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import pytest

from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
RATE = 100  # events per second
COUNT = 200

OPEN = """(path) => new Promise((resolve) => {
  window.arrived = [];
  const source = new EventSource(path);
  window.source = source;
  source.onopen = () => resolve("open");
  source.onmessage = (e) => { const t = JSON.parse(e.data).t; window.arrived.push([t, Date.now()]); };
})"""


def stream_latencies(page: Any, gateway: Gateway, kafka: Kafka, route: Any, coding: str) -> tuple[str, list[float]]:
    """Open a stream (its Content-Encoding as Chromium got it), produce at RATE, return the latencies (ms)."""
    topic = kafka.topic()
    path = f"/cb/{coding}/{uuid.uuid4().hex[:6]}"
    route(path=path, topic=topic, compression=coding != "identity", heartbeat_seconds=3600)
    heads: dict[str, str] = {}
    page.on("response", lambda r: heads.update(r.headers) if r.url.endswith(path) else None)
    page.goto(f"{gateway.url}/healthz")
    assert page.evaluate(OPEN, path) == "open"
    start = time.monotonic()
    for n in range(COUNT):
        time.sleep(max(0.0, start + n / RATE - time.monotonic()))
        value = json.dumps({"t": time.time() * 1000, "n": n, "home": "Arsenal", "score": [n, 1]})
        kafka.produce(topic, value, flush=False)
        kafka.producer.poll(0)
    kafka.flush()
    page.wait_for_function(f"window.arrived.length >= {COUNT}", timeout=WAIT_MS)
    arrived = page.evaluate("window.arrived")
    page.evaluate("window.source.close()")
    assert len(arrived) == COUNT
    return heads.get("content-encoding", "identity"), [done - produced for produced, done in arrived]


@pytest.mark.parametrize("coding", ["br", "gzip", "identity"])
def test_event_source_gets_every_event_of_a_compressed_stream(
    chromium: Any, gateway: Gateway, kafka: Kafka, route: Any, coding: str
) -> None:
    # Chromium asks for gzip, deflate, br and zstd; a gzip stream is what a client without br gets.
    accept = {"gzip": {"accept-encoding": "gzip"}}.get(coding, {})
    context = chromium.new_context(extra_http_headers=accept)
    try:
        page = context.new_page()
        got, latencies = stream_latencies(page, gateway, kafka, route, coding)
    finally:
        context.close()
    assert got == coding
    quantiles = statistics.quantiles(latencies, n=100)
    print(f"\n{coding}: {COUNT} events at {RATE}/s, latency p50 {quantiles[49]:.1f} ms, p99 {quantiles[98]:.1f} ms")
