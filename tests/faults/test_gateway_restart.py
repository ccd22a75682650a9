"""The gateway is stopped (SIGTERM, then SIGKILL) and started again under 100 resuming clients."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

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

pytestmark = pytest.mark.slow


async def test_sigterm_then_sigkill_and_restart(
    gateway_factory: Callable[..., Gateway], kafka: Any, fault_paths: Any, fault_report: Any
) -> None:
    topic = kafka.topic(partitions=PARTITIONS)
    paths = fault_paths(topic)
    gateway = gateway_factory()
    producer = LedgerProducer(kafka.bootstrap, topic)
    producer.start()
    clients = await clients_start(gateway.port, paths)
    try:
        await produced_past(producer, 60)
        # SIGTERM: every open response ends with its terminator, nothing half-written.
        assert gateway.process is not None
        clean_before = sum(c.stats.clean_ends for c in clients)
        gateway.process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert await asyncio.to_thread(gateway.process.wait, 30) == 0
        term_seconds = time.monotonic() - started
        clean_after_term = sum(c.stats.clean_ends for c in clients) - clean_before
        abrupt_after_term = sum(c.stats.abrupt_ends for c in clients)
        gateway.start(port=gateway.port)
        await produced_past(producer, 60)
        await clients_caught_up(clients, producer, within=60)
        # SIGKILL: no goodbye; clients see a broken connection and resume by their last id.
        assert gateway.process is not None
        gateway.process.kill()
        await asyncio.to_thread(gateway.process.wait, 30)
        await produced_past(producer, 30)
        gateway.start(port=gateway.port)
        await produced_past(producer, 60)
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
    finally:
        await clients_stop(clients)
    verdict = ledger_check(clients, producer)
    fault_report(
        "gateway SIGTERM + SIGKILL, restart",
        len(clients),
        produced,
        verdict,
        max(c.stats.max_recovery for c in clients),
        f"SIGTERM: {clean_after_term}/{len(clients)} ended cleanly in {term_seconds:.1f}s",
    )
    assert clean_after_term == len(clients)
    assert abrupt_after_term == 0
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
