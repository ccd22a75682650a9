"""The way to the broker is cut (a ``tansu proxy`` in between is stopped) under open streams, then restored.

The broker and its data stay; every connection Sluice and the producer make goes
through the proxy (the broker advertises the proxy's address). Open streams stay
open with heartbeats; once the proxy is back every client gets everything
produced before, during and after, in order, nothing twice. The outage lasts
``SLUICE_FAULT_OUTAGE_SECONDS`` (10 s by default to keep CI short; 20 s with
100 clients in the documented run, docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from streams.server.broker import topic_ensure
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
from tests.support.kafka_proxy import ProxiedBroker
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.slow

OUTAGE_SECONDS = float(os.environ.get("SLUICE_FAULT_OUTAGE_SECONDS", "10"))


async def test_broker_out_of_reach_then_back_loses_and_repeats_nothing(
    gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, fault_paths: Any, fault_report: Any
) -> None:
    topic = "outage-live"
    topic_ensure(proxied.bootstrap, topic, PARTITIONS)
    paths = fault_paths(topic, int(os.environ.get("SLUICE_FAULT_OUTAGE_CLIENTS", "40")))
    gateway = gateway_factory(KAFKA_BOOTSTRAP_SERVERS=proxied.bootstrap, SLUICE_KAFKA_TIMEOUT="2")
    producer = LedgerProducer(proxied.bootstrap, topic)
    producer.start()
    clients = await clients_start(gateway.port, paths)
    try:
        await produced_past(producer, 60)
        ends_before = sum(c.stats.clean_ends + c.stats.abrupt_ends for c in clients)
        proxied.proxy_stop()
        cut_at = time.monotonic()
        await condition_wait_async(
            lambda: time.monotonic() - cut_at >= OUTAGE_SECONDS,
            within=OUTAGE_SECONDS + 5,
            what="the end of the outage",
            interval=0.2,
        )
        ends_during = sum(c.stats.clean_ends + c.stats.abrupt_ends for c in clients) - ends_before
        await asyncio.to_thread(proxied.proxy_start)
        back_at = time.monotonic()
        await produced_past(producer, 1)
        await clients_caught_up(clients, producer)
        recovered_in = time.monotonic() - back_at
        await produced_past(producer, 60)
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
    finally:
        await clients_stop(clients)
    verdict = ledger_check(clients, producer)
    fault_report(
        f"broker out of reach {OUTAGE_SECONDS:.0f}s (proxy stopped), data kept",
        len(clients),
        produced,
        verdict,
        recovered_in,
        f"streams ended during the outage {ends_during}; all level {recovered_in:.1f}s after the proxy was back",
    )
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
