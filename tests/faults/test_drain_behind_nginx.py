"""Three gateways behind deploy/nginx.conf: one killed, one drained mid-stream, nothing lost or repeated.

Clients reconnect like ``EventSource``s (they wait the last ``retry:`` a stream sent) through nginx.
One gateway is SIGKILLed: its clients see a broken response and resume on the others. Then another
gets SIGTERM: its streams end in waves over the drain window, each told a randomized ``retry:``, so
its clients come back spread over the window, not in one burst. Every client's events are held
against the producer's ledger. With ``-m services`` (CI) the gateways share PostgreSQL and Redis.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Gateway
from tests.deploy.nginx import Nginx, nginx_binary
from tests.faults.harness import (
    PARTITIONS,
    LedgerProducer,
    clients_caught_up,
    clients_start,
    clients_stop,
    ledger_check,
    produced_past,
)

pytestmark = [
    pytest.mark.services,
    pytest.mark.slow,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (Debian: apt-get install nginx-light)"),
]

CLIENTS = 60
DRAIN_SECONDS = 3.0
RETRY_MS = 500  # the routes' retry: the drain adds up to one wave to it


async def test_one_gateway_killed_and_one_drained_behind_nginx_lose_and_repeat_nothing(
    tmp_path: Path, gateway_factory: Callable[..., Gateway], kafka: Any, fault_paths: Any, fault_report: Any
) -> None:
    settings = {"SLUICE_DRAIN_SECONDS": str(DRAIN_SECONDS), "SLUICE_SHUTDOWN_SECONDS": str(DRAIN_SECONDS + 3)}
    gateways = [gateway_factory(**settings) for _ in range(3)]
    nginx = Nginx(tmp_path, [f"127.0.0.1:{gateway.port}" for gateway in gateways]).start()
    topic = kafka.topic(partitions=PARTITIONS)
    paths = fault_paths(topic, CLIENTS, retry_ms=RETRY_MS)
    producer = LedgerProducer(kafka.bootstrap, topic)
    producer.start()
    clients = await clients_start(nginx.port, paths, honour_retry=True)
    try:
        await produced_past(producer, 40)
        killed, drained, _ = gateways
        assert killed.process is not None
        assert drained.process is not None
        killed.process.kill()
        await asyncio.to_thread(killed.process.wait, 30)
        await produced_past(producer, 40)
        await clients_caught_up(clients, producer, within=60)

        term_at = time.monotonic()
        drained.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(drained.process.wait, 30) == 0
        term_seconds = time.monotonic() - term_at
        await produced_past(producer, 40)
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
    finally:
        await clients_stop(clients)
        nginx.stop()
    verdict = ledger_check(clients, producer)
    # Every stream the drain ended came back after its own retry: when it got its 200 again.
    back = sorted(opened - term_at for c in clients for ended, opened in c.reopened if ended >= term_at)
    fault_report(
        "3 gateways behind nginx: one SIGKILL, one drained",
        len(clients),
        produced,
        verdict,
        max(c.stats.max_recovery for c in clients),
        f"drain: {len(back)} streams back {back[0]:.2f}-{back[-1]:.2f}s after SIGTERM, exit in {term_seconds:.1f}s"
        if back
        else "drain: no stream ended",
    )
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
    assert len(back) >= 5, back
    # Spread over the window, not one burst: at least a second between the first and the last,
    # and no 100 ms holds more than half of them.
    assert back[-1] - back[0] >= 1.0, back
    assert max(sum(1 for t in back if start <= t < start + 0.1) for start in back) <= len(back) / 2, back
    assert all(t >= RETRY_MS / 1000 for t in back), back
