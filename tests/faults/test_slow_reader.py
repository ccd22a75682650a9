"""One client reads at 1 KB/s among 99 that read normally: their latency holds, it is cut and resumes losslessly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from streams.services import topic_upsert
from tests.conftest import Gateway
from tests.faults.harness import (
    PARTITIONS,
    LedgerProducer,
    ResumingClient,
    clients_caught_up,
    clients_start,
    clients_stop,
    ledger_check,
    produced_past,
)
from tests.support.metrics_scrape import metrics_read
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.slow

MAX_PENDING_BYTES = 64 * 1024
CACHE_MAX_MESSAGES = 150
PAD = 900  # about 1 KB a message, 100 a second: 100 times what the slow reader takes
RATE = 100.0
# The kernel's send buffer for the slow socket grows (autotuning, up to a few MB) before the
# gateway sees congestion; how long that takes depends on the machine, so the wait is generous.
CUT_WAIT = 180


def p95(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[int(len(ordered) * 0.95)] if ordered else 0.0


def window(clients: list[ResumingClient], start: float, end: float) -> list[float]:
    return [lat for c in clients for at, lat in c.latencies if start <= at < end]


async def test_a_slow_reader_is_cut_without_slowing_the_others(
    gateway_factory: Callable[..., Gateway], kafka: Any, fault_paths: Any, fault_report: Any
) -> None:
    topic = kafka.topic(partitions=PARTITIONS)
    # A small cache: a reader left behind (congested, so catching up from the cache) falls out of it within seconds.
    topic_upsert(name=topic, cache_max_messages=CACHE_MAX_MESSAGES)
    paths = fault_paths(topic, 99, initial="live", max_pending_bytes=MAX_PENDING_BYTES)
    gateway = gateway_factory()
    producer = LedgerProducer(kafka.bootstrap, topic, rate=RATE, pad=PAD)
    # Live routes: every client is connected before the first message, so all must get all of them.
    clients = await clients_start(gateway.port, paths)
    producer.start()
    slow = ResumingClient(gateway.port, paths[0][0], None, read_delay=1.0, fast_after_cut=True)
    try:
        await produced_past(producer, 120)
        baseline = (time.time() - 3, time.time())
        slow.start()
        async with httpx.AsyncClient(base_url=gateway.url) as http:

            async def cut() -> bool:
                return (await metrics_read(http, topic)).get("sluice_slow_clients_cut_total", 0) >= 1

            await condition_wait_async(cut, within=CUT_WAIT, what="the gateway to cut the slow reader", interval=0.2)
        during = (baseline[1], time.time())
        # Its link recovers: it reads what its socket still holds, sees the end, and resumes by its last id.
        slow.read_delay = 0.0
        await condition_wait_async(
            lambda: slow.cut_at is not None, within=60, what=lambda: f"the slow reader to see the cut: {slow.stats}"
        )
        await produced_past(producer, 40)
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
        first = min(slow.received)
        expected_after = {s for seqs in producer.expected(None).values() for s in seqs if s >= first}
        await condition_wait_async(
            lambda: expected_after <= set(slow.received), within=60, what="the slow reader to catch up"
        )
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            cut_total = (await metrics_read(http, topic)).get("sluice_slow_clients_cut_total", 0)
    finally:
        await clients_stop([*clients, slow])
    # The slow reader joined while the producer ran: it must have everything after its start position.
    first = min(slow.received)
    slow_verdict = ledger_check([slow], producer)
    verdict = ledger_check(clients, producer)
    before, while_slow = p95(window(clients, *baseline)), p95(window(clients, *during))
    fault_report(
        "one reader at 1 KB/s among 99",
        len(clients) + 1,
        produced,
        verdict,
        slow.stats.max_recovery,
        f"p95 latency of the others {before * 1000:.0f} ms before, {while_slow * 1000:.0f} ms while the slow one "
        f"held on ({during[1] - during[0]:.1f}s); slow one cut {int(cut_total)}x, resumed with "
        f"{len(slow.received)} events",
    )
    assert cut_total >= 1
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
    # The slow one started mid-stream: nothing after its first event may be missing or doubled.
    assert set(slow.received) == expected_after
    assert len(slow.received) == len(expected_after)
    assert slow_verdict.out_of_order == 0
    assert while_slow <= max(3 * before, before + 0.5)
