"""Chromium's own EventSource over compressed streams: every event arrives as it is produced.

Three pages open an EventSource each on the gateway (same origin): one on a route that
compresses (Chromium asks for br), one on the same route with a context that asks for gzip
only, one on a route that does not compress. Both routes read one topic, so each event
reaches the three streams in the same fan-out and the latencies compare the codings under
the same load. The test produces at 100 msg/s, each event carrying its produce time; each
page records when each arrives. Delivery is asserted; the latencies are printed for
docs/operations.md ("Compression"), never asserted (the machine is shared).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from typing import Any

import pytest

from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
RATE = 100  # events per second
COUNT = 300

OPEN = """(path) => new Promise((resolve) => {
  window.arrived = [];
  const source = new EventSource(path);
  window.source = source;
  source.onopen = () => resolve("open");
  source.onmessage = (e) => { const t = JSON.parse(e.data).t; window.arrived.push([t, Date.now()]); };
})"""

# coding -> the context's extra request headers (Chromium itself asks for gzip, deflate, br, zstd).
CONTEXTS = {"br": {}, "gzip": {"accept-encoding": "gzip"}, "identity": {}}


def test_event_source_gets_every_event_of_br_and_gzip_streams(
    chromium: Any, gateway: Gateway, kafka: Kafka, route: Any
) -> None:
    topic = kafka.topic()
    tag = uuid.uuid4().hex[:6]
    compressed, plain = f"/cb/{tag}/z", f"/cb/{tag}/plain"
    route(path=compressed, topic=topic, compression=True, heartbeat_seconds=3600)
    route(path=plain, topic=topic, heartbeat_seconds=3600)
    contexts, pages, heads = [], {}, {}
    try:
        for coding, extra in CONTEXTS.items():
            context = chromium.new_context(extra_http_headers=extra)
            contexts.append(context)
            page = pages[coding] = context.new_page()
            path = plain if coding == "identity" else compressed
            heads[coding] = {}
            page.on("response", lambda r, h=heads[coding], p=path: h.update(r.headers) if r.url.endswith(p) else None)
            page.goto(f"{gateway.url}/healthz")
            assert page.evaluate(OPEN, path) == "open"
        start = time.monotonic()
        for n in range(COUNT):
            time.sleep(max(0.0, start + n / RATE - time.monotonic()))
            value = json.dumps({"t": time.time() * 1000, "n": n, "match": "m-1", "home": "Arsenal", "score": [n, 1]})
            kafka.produce(topic, value, flush=False)
            kafka.producer.poll(0)
        kafka.flush()
        latencies = {}
        for coding, page in pages.items():
            page.wait_for_function(f"window.arrived.length >= {COUNT}", timeout=WAIT_MS)
            arrived = page.evaluate("window.arrived")
            assert len(arrived) == COUNT
            latencies[coding] = [done - produced for produced, done in arrived]
    finally:
        for context in contexts:
            context.close()
    for coding in CONTEXTS:
        assert heads[coding].get("content-encoding", "identity") == coding
    print(f"\n{COUNT} events at {RATE}/s, load average {os.getloadavg()[0]:.1f}")
    for coding, values in latencies.items():
        q = statistics.quantiles(values, n=100)
        print(f"| {coding} | {statistics.median(values):.1f} ms | {q[98]:.1f} ms |")
