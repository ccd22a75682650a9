"""Resume storm (SPEC 2.5): cut 20 times while 10,000 keyed messages are produced, lose and repeat nothing.

A producer thread writes keyed messages over three partitions while one client
reads the stream over a real socket, is cut at seeded random points, and
reconnects with ``Last-Event-ID`` like a browser. Half of the reconnects come
back while the topic's small cache still holds everything after the client's
position; for the other half more than the cache holds is produced while the
client is away, so the catch-up must read Kafka. The gateway's catch-up
counters show which path each reconnect took.

The producer is gated, not timed: while the client is connected it runs at
most ``WINDOW`` messages ahead of it, and while it is away it produces exactly
the amount the schedule asks for. That keeps "inside" and "outside" certain on
any machine, however slow.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from streams.core.ids import event_id_parse
from streams.services import topic_upsert
from tests.conftest import Gateway, Kafka
from tests.support.metrics_scrape import metrics_read
from tests.support.polling import condition_wait_async
from tests.support.progress import progress_advance
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.slow

SEED = 20_251_122
MESSAGES = 10_000
PARTITIONS = 3
CUTS = 20
CACHE_MAX_MESSAGES = 300
# While connected the producer stays at most this far ahead of the client.
WINDOW = 100
# Produced while the client is away: well inside the cache, or well beyond it.
# Inside: at most WINDOW + 100 records after the client's position, far fewer
# than the cache keeps even with records of the same millisecond evicted first.
# Outside: more records after the position than the whole cache holds, so at
# least one of them has been evicted and its partition must be read from Kafka.
INSIDE_AWAY = (10, 100)
OUTSIDE_AWAY = (CACHE_MAX_MESSAGES + 100, CACHE_MAX_MESSAGES + 250)
DEADLINE = 60.0


class GatedProducer(threading.Thread):
    """Produces ``MESSAGES`` keyed messages, never more than the client's ``allowance``."""

    def __init__(self, bootstrap: str, topic: str, rng: random.Random) -> None:
        super().__init__(daemon=True, name="resume-producer")
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "log_level": 0})
        self.topic = topic
        self.keys = [f"user-{rng.randrange(10_000)}" for _ in range(MESSAGES)]
        self.allowance = 0
        self.produced = 0  # delivered (acknowledged) messages
        self.by_offset: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq
        self.error: BaseException | None = None
        self._gate = threading.Condition()
        self._stopping = False

    def allow(self, count: int) -> None:
        with self._gate:
            self.allowance = max(self.allowance, min(count, MESSAGES))
            self._gate.notify_all()

    def stop(self) -> None:
        with self._gate:
            self._stopping = True
            self._gate.notify_all()

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            raise RuntimeError(f"delivery failed: {error}")
        seq = json.loads(message.value())["seq"]
        self.by_offset[(message.partition(), message.offset())] = seq

    def run(self) -> None:
        try:
            while self.produced < MESSAGES:
                with self._gate:
                    if not self._gate.wait_for(lambda: self._stopping or self.allowance > self.produced, DEADLINE):
                        raise TimeoutError("the client stopped asking for messages")
                    if self._stopping:
                        return
                    batch = min(self.allowance - self.produced, 50)
                for seq in range(self.produced, self.produced + batch):
                    key = self.keys[seq]
                    value = json.dumps({"seq": seq, "key": key})
                    self.producer.produce(
                        self.topic, value=value.encode(), key=key.encode(), on_delivery=self._delivered
                    )
                if self.producer.flush(30) != 0:
                    raise TimeoutError("messages not delivered")
                self.produced += batch
        except BaseException as exc:  # the test reports it
            self.error = exc


class ResumingClient:
    """Reads the stream like a browser: remembers the last dispatched id, checks every event's position."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.position: dict[int, int] | None = None
        self.received: list[tuple[int, int, int]] = []  # (partition, offset, seq) in arrival order

    def accept(self, event_id: str | None, data: str | None) -> None:
        assert event_id is not None
        progress = event_id_parse(event_id).progress
        if data is not None:
            self.received.append((*progress_advance(self.position, progress, event_id), json.loads(data)["seq"]))
        elif self.position is not None:
            assert all(progress[p] >= o for p, o in self.position.items()), "a checkpoint went backwards"
        self.position = progress
        self.last_id = event_id


async def test_resume_storm_loses_and_repeats_nothing(gateway: Gateway, kafka: Kafka, route: Any) -> None:
    rng = random.Random(SEED)
    topic = kafka.topic(partitions=PARTITIONS, prefix="resume")
    topic_upsert(name=topic, cache_max_messages=CACHE_MAX_MESSAGES)
    path = f"/resume/{topic}"
    route(path=path, topic=topic, initial="earliest")
    schedule = ["inside"] * (CUTS // 2) + ["outside"] * (CUTS - CUTS // 2)
    rng.shuffle(schedule)

    producer = GatedProducer(kafka.bootstrap, topic, rng)
    client = ResumingClient()
    taken: list[tuple[str, int, int]] = []  # (kind, cache catch-ups, kafka catch-ups) per reconnect
    started = time.monotonic()
    producer.start()
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(DEADLINE)) as http:

            async def hub_caught_up() -> dict[str, float] | None:
                """The topic's counters once the hub has read everything produced so far."""
                now = await metrics_read(http, topic)
                return now if now.get("sluice_records_total", 0) >= producer.produced else None

            async def path_seen(kind: str, before: dict[str, float]) -> bool:
                now = await metrics_read(http, topic)
                cache = now.get("sluice_catch_ups_cache_total", 0) - before.get("sluice_catch_ups_cache_total", 0)
                cold = now.get("sluice_catch_ups_kafka_total", 0) - before.get("sluice_catch_ups_kafka_total", 0)
                # At least: a client that falls behind its connection while live
                # catches up from the cache once more.
                if kind == "inside":
                    assert cold == 0, "a resume inside the cache read Kafka"
                    seen = cache >= 1
                else:
                    seen = cold >= 1
                if seen:
                    taken.append((kind, int(cache), int(cold)))
                return seen

            async def connection(number: int, before: dict[str, float]) -> None:
                """One connection: read until its random cut point.

                The cut waits, if need be, until the catch-up path of this
                connection has shown in the counters and, when the next
                reconnect is meant to land inside the cache, until the client
                is within ``WINDOW`` of everything the producer may write.
                """
                last = number == CUTS
                kind = schedule[number - 1] if number else None
                next_inside = not last and schedule[number] == "inside"
                cut_after = rng.randint(1, 150)
                got = 0
                path_ok = kind is None
                parser = EventParser()
                headers = {"Last-Event-ID": client.last_id} if client.last_id else {}
                async with http.stream("GET", path, headers=headers) as response:
                    assert response.status_code == 200
                    producer.allow(len(client.received) + WINDOW)
                    async for chunk in response.aiter_raw():
                        asked = False  # the counters, at most once a chunk
                        for event in parser.feed(chunk):
                            client.accept(event.id, event.data if event.has_data else None)
                            got += event.has_data
                            if last or got < cut_after:
                                continue
                            if next_inside and producer.allowance - len(client.received) > WINDOW:
                                continue
                            if not path_ok and not asked:
                                asked = True
                                path_ok = await path_seen(kind or "", before)
                            if path_ok:
                                return  # the cut: the rest of this chunk is never seen
                        if last and len(client.received) == MESSAGES:
                            assert path_ok or await path_seen(kind or "", before), "the last resume left no trace"
                            return
                        producer.allow(len(client.received) + WINDOW)

            before: dict[str, float] = {}
            for number in range(CUTS + 1):
                await asyncio.wait_for(connection(number, before), timeout=DEADLINE)
                if number == CUTS:
                    break
                # Away: exactly this much more is produced, and the hub has read it, before the reconnect.
                away = INSIDE_AWAY if schedule[number] == "inside" else OUTSIDE_AWAY
                producer.allow(len(client.received) + rng.randint(*away))
                await condition_wait_async(
                    lambda: producer.produced >= producer.allowance or producer.error is not None,
                    within=DEADLINE,
                    what="the producer",
                    interval=0.01,
                )
                assert producer.error is None, producer.error
                before = await condition_wait_async(
                    hub_caught_up, within=DEADLINE, what="the hub to read what was produced", interval=0.01
                )
            final = await metrics_read(http, topic)
    finally:
        producer.stop()
        producer.join(timeout=DEADLINE)
    assert producer.error is None, producer.error
    elapsed = time.monotonic() - started

    # Every reconnect took the path it was meant to.
    assert [kind for kind, _, _ in taken] == schedule
    from_cache = sum(1 for kind, _, _ in taken if kind == "inside")
    from_kafka = sum(1 for kind, _, _ in taken if kind == "outside")
    print(
        f"\nresume storm: {MESSAGES} messages, {CUTS} cuts, {from_cache} resumes from the cache, "
        f"{from_kafka} from Kafka (counters: cache {final.get('sluice_catch_ups_cache_total')}, "
        f"kafka {final.get('sluice_catch_ups_kafka_total')}), {elapsed:.1f}s"
    )
    assert from_cache == CUTS // 2
    assert from_kafka == CUTS - CUTS // 2
    assert final.get("sluice_catch_ups_kafka_total") == from_kafka
    # Nobody was cut for being slow: each cut was the client's own.
    assert final.get("sluice_slow_clients_cut_total", 0) == 0

    # The union is exactly what was produced: no loss, no duplicate, per-partition order.
    assert len(producer.by_offset) == MESSAGES
    received_positions = [(p, o) for p, o, _ in client.received]
    assert len(set(received_positions)) == len(received_positions), "a message arrived twice"
    assert set(received_positions) == set(producer.by_offset), "messages lost"
    for p, o, seq in client.received:
        assert producer.by_offset[(p, o)] == seq, f"partition {p} offset {o} carried the wrong payload"
    produced_order: dict[int, list[int]] = {}
    for (p, _), seq in sorted(producer.by_offset.items()):
        produced_order.setdefault(p, []).append(seq)
    received_order: dict[int, list[int]] = {}
    for p, _, seq in client.received:
        received_order.setdefault(p, []).append(seq)
    assert received_order == produced_order
    assert len(produced_order) == PARTITIONS, "the keys did not spread over every partition"
