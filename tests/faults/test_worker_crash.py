"""One of two ``runstreams`` workers is killed; the supervisor replaces it and its clients resume."""

from __future__ import annotations

import asyncio
import os
import signal
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
from tests.guards.test_admission_wire import connections_by_process
from tests.streams.server.test_workers import children_of
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.slow


async def test_a_killed_worker_is_replaced_and_nothing_is_lost(
    gateway_factory: Callable[..., Gateway], kafka: Any, fault_paths: Any, fault_report: Any
) -> None:
    topic = kafka.topic(partitions=PARTITIONS)
    paths = fault_paths(topic)
    gateway = gateway_factory("--workers", "2")
    assert gateway.process is not None
    supervisor = gateway.process.pid
    workers = await condition_wait_async(
        lambda: len(children_of(supervisor)) == 2 and children_of(supervisor), within=30, what="two workers"
    )
    producer = LedgerProducer(kafka.bootstrap, topic)
    producer.start()
    clients = await clients_start(gateway.port, paths)
    try:
        await produced_past(producer, 60)
        held = connections_by_process(set(workers), gateway.port)
        victim = max(held, key=lambda pid: held[pid])  # the worker with the most streams
        lost_before = sum(c.stats.abrupt_ends for c in clients)
        os.kill(victim, signal.SIGKILL)
        replaced = await condition_wait_async(
            lambda: len(children_of(supervisor) - {victim}) == 2 and children_of(supervisor),
            within=30,
            what="a new worker in place of the killed one",
        )
        await produced_past(producer, 60)
        cut = sum(c.stats.abrupt_ends for c in clients) - lost_before
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(clients, producer)
    finally:
        await clients_stop(clients)
    verdict = ledger_check(clients, producer)
    fault_report(
        "worker SIGKILL (--workers 2)",
        len(clients),
        produced,
        verdict,
        max(c.stats.max_recovery for c in clients),
        f"{cut} clients cut with the killed worker (it held {held[victim]} of {sum(held.values())})",
    )
    assert cut == held[victim] > 0
    assert victim not in replaced
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
