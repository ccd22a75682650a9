"""The broker is frozen (SIGSTOP) under 100 open streams, then thawed (SIGCONT).

Open streams stay open and keep their heartbeats; a new stream that needs
metadata gets 503 with ``retry-after``; after the thaw every client gets
everything produced meanwhile. The freeze lasts ``SLUICE_FAULT_FREEZE_SECONDS``
(10 s by default to keep CI short; 30 s in the documented run).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from streams.server.broker import EmbeddedBroker, topic_ensure
from tests.conftest import Gateway
from tests.faults.harness import (
    PARTITIONS,
    LedgerProducer,
    clients_caught_up,
    clients_start,
    clients_stop,
    ledger_check,
    produced_past,
)
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.slow

FREEZE_SECONDS = float(os.environ.get("SLUICE_FAULT_FREEZE_SECONDS", "10"))


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this test alone: freezing the session's would stall every other test."""
    broker = EmbeddedBroker().start()
    yield broker
    if broker.process is not None:
        broker.process.send_signal(signal.SIGCONT)
    broker.stop()


async def test_frozen_broker_keeps_streams_open_refuses_new_ones_and_loses_nothing(
    gateway_factory: Callable[..., Gateway], own_broker: EmbeddedBroker, fault_paths: Any, fault_report: Any
) -> None:
    topic, fresh = "freeze-live", "freeze-fresh"
    topic_ensure(own_broker.bootstrap, topic, PARTITIONS)
    topic_ensure(own_broker.bootstrap, fresh, 1)
    paths = fault_paths(topic)
    fresh_path = next(p for p, _ in fault_paths(fresh, 1))
    gateway = gateway_factory(KAFKA_BOOTSTRAP_SERVERS=own_broker.bootstrap, SLUICE_KAFKA_TIMEOUT="2")
    producer = LedgerProducer(own_broker.bootstrap, topic)
    producer.start()
    clients = await clients_start(gateway.port, paths)
    assert own_broker.process is not None
    try:
        await produced_past(producer, 60)
        ends_before = sum(c.stats.clean_ends + c.stats.abrupt_ends for c in clients)
        heartbeats_before = [c.stats.heartbeats for c in clients]
        own_broker.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(30)) as http:
            refused = await http.get(fresh_path)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"]
        assert refused.json()["error"] == "kafka_unavailable"
        # Every open stream keeps beating for the whole freeze.
        await condition_wait_async(
            lambda: time.monotonic() - frozen_at >= FREEZE_SECONDS,
            within=FREEZE_SECONDS + 5,
            what="the end of the freeze",
            interval=0.2,
        )
        ends_during = sum(c.stats.clean_ends + c.stats.abrupt_ends for c in clients) - ends_before
        beats = [c.stats.heartbeats - before for c, before in zip(clients, heartbeats_before, strict=True)]
        own_broker.process.send_signal(signal.SIGCONT)
        thawed_at = time.monotonic()
        await produced_past(producer, 1)
        await clients_caught_up(clients, producer)
        resumed_in = time.monotonic() - thawed_at
        await produced_past(producer, 60)
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
    finally:
        await clients_stop(clients)
    verdict = ledger_check(clients, producer)
    fault_report(
        f"broker SIGSTOP {FREEZE_SECONDS:.0f}s, SIGCONT",
        len(clients),
        produced,
        verdict,
        resumed_in,
        f"new stream: 503 retry-after {refused.headers['retry-after']}; "
        f"heartbeats per stream while frozen {min(beats)}..{max(beats)}; streams ended while frozen {ends_during}",
    )
    assert ends_during == 0, "".join(gateway.output)[-5000:]
    assert min(beats) >= FREEZE_SECONDS / 2  # heartbeat_seconds=1: about one a second, never silence
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
