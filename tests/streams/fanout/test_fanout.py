"""One Kafka fetch per topic per worker, whatever the number of clients (SPEC 2.5).

Real broker, real gateway over sockets. The tests with many clients run a
gateway of their own, so its counts (consumers and cuts in /metrics, librdkafka
client threads in /proc) belong to them alone. Every client checks, from the
ids, that each event moves exactly one partition by exactly one offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from streams.core.ids import event_id_parse
from streams.services import topic_upsert
from tests.conftest import Gateway, Kafka
from tests.support.metrics_scrape import metric_wait, metrics_parse, metrics_read
from tests.support.polling import condition_wait_async
from tests.support.progress import progress_advance
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.services

CLIENTS = 200
MESSAGES = 50
PARTITIONS = 3
DEADLINE = 60.0


def librdkafka_clients(pid: int) -> int:
    """Kafka client instances in a process: librdkafka runs one ``rdk:main`` thread per instance."""
    count = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # the thread ended meanwhile
            count += (task / "comm").read_text().strip() == "rdk:main"
    return count


class Stream:
    """One client: every data event as ``(partition, offset, payload)``, positions taken from the ids."""

    def __init__(self) -> None:
        self.parser = EventParser()
        self.position: dict[int, int] | None = None
        self.events: list[tuple[int, int, str]] = []
        self.opened = asyncio.Event()

    def feed(self, chunk: bytes) -> None:
        for event in self.parser.feed(chunk):
            assert event.id is not None
            progress = event_id_parse(event.id).progress
            if event.has_data:
                self.events.append((*progress_advance(self.position, progress, event.id), event.data))
            self.position = progress
            self.opened.set()

    async def read(self, http: httpx.AsyncClient, path: str, until: Callable[[Stream], bool]) -> None:
        async with http.stream("GET", path) as response:
            assert response.status_code == 200, response.status_code
            async for chunk in response.aiter_raw():
                self.feed(chunk)
                if until(self):
                    return
        raise AssertionError("the stream ended")


async def all_opened(streams: list[Stream], readers: list[asyncio.Task[None]]) -> None:
    """Wait until every stream has its start checkpoint; a reader that fails first fails the test."""
    opened = asyncio.ensure_future(asyncio.gather(*(s.opened.wait() for s in streams)))
    done, _ = await asyncio.wait([opened, *readers], timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        task.result()
    if opened not in done:
        opened.cancel()
        raise AssertionError("not every stream opened in time")


class SteadyProducer(threading.Thread):
    """Writes small keyed batches without pause until stopped; remembers what the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, batch: int = 10, pause: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "log_level": 0})
        self.topic = topic
        self.partitions = partitions
        self.batch = batch
        self.pause = pause
        self.acked: dict[tuple[int, int], str] = {}
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked[(message.partition(), message.offset())] = message.value().decode()
        else:
            self.error = RuntimeError(str(error))

    def run(self) -> None:
        seq = 0
        try:
            while not self.stopping.is_set():
                for _ in range(self.batch):
                    self.producer.produce(
                        self.topic,
                        value=json.dumps({"seq": seq}).encode(),
                        key=f"k{seq % 17}".encode(),
                        partition=seq % self.partitions,
                        on_delivery=self._delivered,
                    )
                    seq += 1
                if self.producer.flush(30) != 0:
                    raise TimeoutError("messages not delivered")
                self.stopping.wait(self.pause)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=DEADLINE)
        assert not self.is_alive()
        assert self.error is None, self.error


async def test_many_clients_share_one_consumer_and_all_get_everything(
    own_gateway: Gateway, kafka: Kafka, route: Any
) -> None:
    """200 streams of one topic: one live consumer in the worker, and every stream gets all 50 messages."""
    topic = kafka.topic(partitions=PARTITIONS, prefix="fanout")
    path = f"/fanout/{topic}"
    route(path=path, topic=topic)
    assert own_gateway.process is not None
    pid = own_gateway.process.pid
    limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=CLIENTS + 10)
    async with httpx.AsyncClient(base_url=own_gateway.url, timeout=httpx.Timeout(DEADLINE), limits=limits) as http:
        before = await metrics_read(http)
        assert before["sluice_kafka_consumers"] == 0
        assert librdkafka_clients(pid) == 0

        streams = [Stream() for _ in range(CLIENTS)]
        readers = [
            asyncio.create_task(stream.read(http, path, lambda s: len(s.events) >= MESSAGES)) for stream in streams
        ]
        await all_opened(streams, readers)
        await metric_wait(http, "sluice_subscribers", topic, lambda v: v == CLIENTS, within=DEADLINE)

        produced: dict[tuple[int, int], str] = {}

        def delivered(error: Any, message: Any) -> None:
            assert error is None, error
            produced[(message.partition(), message.offset())] = message.value().decode()

        for seq in range(MESSAGES):
            kafka.producer.produce(
                topic, value=f"message {seq}".encode(), key=f"key-{seq}".encode(), on_delivery=delivered
            )
        kafka.flush()
        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*readers), timeout=DEADLINE)
        print(f"\nfan-out: {CLIENTS} clients x {MESSAGES} messages delivered in {time.monotonic() - started:.2f}s")

        expected = sorted((p, o, value) for (p, o), value in produced.items())
        assert len(expected) == MESSAGES
        assert {p for p, _, _ in expected} == set(range(PARTITIONS))
        for stream in streams:
            assert sorted(stream.events) == expected
            assert len(stream.events) == MESSAGES  # none twice

        text = (await http.get("/metrics")).text
        after, per_topic = metrics_parse(text), metrics_parse(text, topic)
        # One hub, so one live consumer, for all the clients of the topic...
        assert after["sluice_kafka_consumers"] == 1
        assert per_topic["sluice_records_total"] == MESSAGES  # ...which read each record once
        assert per_topic["sluice_deliveries_total"] == CLIENTS * MESSAGES
        # ...and the process holds three Kafka clients, not one per stream: the topic's
        # live fetcher, and the cluster's shared metadata look-up client and admin client
        # (which asks topic ids: a topic created again has a new one).
        assert librdkafka_clients(pid) == 3


async def test_clients_leaving_together_are_not_counted_as_slow(own_gateway: Gateway, kafka: Kafka, route: Any) -> None:
    """200 streams close at once while records flow: none of them counts as a slow client cut."""
    topic = kafka.topic(partitions=PARTITIONS, prefix="leave")
    path = f"/leave/{topic}"
    route(path=path, topic=topic)
    limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=CLIENTS + 10)
    async with httpx.AsyncClient(base_url=own_gateway.url, timeout=httpx.Timeout(DEADLINE), limits=limits) as http:
        streams = [Stream() for _ in range(CLIENTS)]
        readers = [asyncio.create_task(stream.read(http, path, lambda s: False)) for stream in streams]
        await all_opened(streams, readers)
        await metric_wait(http, "sluice_subscribers", topic, lambda v: v == CLIENTS, within=DEADLINE)
        producer = SteadyProducer(kafka.bootstrap, topic, PARTITIONS, batch=1, pause=0.005)
        producer.start()
        try:
            await metric_wait(http, "sluice_records_total", topic, lambda v: v >= 100, within=DEADLINE)
            # All at once, while records keep arriving: the hub may write to streams
            # whose connection is already gone before their apps hear of it.
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await metric_wait(http, "sluice_subscribers", topic, lambda v: v == 0, within=DEADLINE)
        finally:
            producer.stop()
        assert (await metrics_read(http, topic))["sluice_slow_clients_cut_total"] == 0
        assert [reader.exception() for reader in readers if not reader.cancelled()] == []


# One partition written to one record at a time: the hub must start although Kafka
# never reports the end. Three written to in bursts: catch-ups read Kafka while
# the small cache moves on under them, so readers are re-assigned backwards.
@pytest.mark.parametrize(("partitions", "burst"), [(1, 1), (3, 30)])
async def test_clients_join_a_topic_written_to_without_pause(
    gateway: Gateway, kafka: Kafka, route: Any, partitions: int, burst: int
) -> None:
    """Clients arrive while the topic is written to without pause, and each gets all of it.

    The hub starts then (Kafka may never report the end of a partition that is
    always being written to), and the clients catch up from Kafka while the
    small cache keeps moving under them, then follow live.
    """
    topic = kafka.topic(partitions=partitions, prefix="busy")
    topic_upsert(name=topic, cache_max_messages=500)
    path = f"/busy/{topic}"
    route(path=path, topic=topic, initial="earliest")
    producer = SteadyProducer(kafka.bootstrap, topic, partitions, batch=burst)
    producer.start()
    streams = [Stream() for _ in range(20)]
    started = time.monotonic()
    try:
        await condition_wait_async(
            lambda: producer.error is not None or len(producer.acked) >= 500,
            within=DEADLINE,
            what="the producer's first 500 records",
            interval=0.01,
        )
        assert producer.error is None, producer.error
        async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(DEADLINE)) as http:
            done = asyncio.Event()
            readers = [
                asyncio.create_task(
                    stream.read(http, path, lambda s: done.is_set() and len(s.events) > len(producer.acked))
                )
                for stream in streams
            ]
            await all_opened(streams, readers)
            target = len(producer.acked) + 300
            await metric_wait(http, "sluice_records_total", topic, lambda v: v >= target, within=DEADLINE)
            producer.stop()
            done.set()
            # Then one more record: every reader ends once it has that one too.
            kafka.produce(topic, json.dumps({"seq": -1}), key="last", partition=0)
            await asyncio.wait_for(asyncio.gather(*readers), timeout=DEADLINE)
    finally:
        if producer.is_alive():
            producer.stopping.set()
            producer.join(timeout=DEADLINE)
    elapsed = time.monotonic() - started
    print(f"\nbusy topic, {partitions} partition(s): {len(producer.acked)} records to 20 clients in {elapsed:.1f}s")
    produced = sorted((p, o, value) for (p, o), value in producer.acked.items())
    for stream in streams:
        # Everything from offset 0 on (Stream checked the ids are contiguous), then the last record.
        assert [e for e in sorted(stream.events) if (e[0], e[1]) in producer.acked] == produced
        assert len(stream.events) == len(produced) + 1
