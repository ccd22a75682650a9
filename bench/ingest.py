"""The hub's per-record cost in process, with and without a schema (no broker, no sockets).

Feeds batches of 200-byte JSON records straight into ``TopicHub.ingest`` with N
live streams whose sinks only collect bytes, and prints microseconds per record
for: no schema, a topic schema, a route schema shared by every stream, and
every stream with its own key filter (records keyed round-robin over the N
keys, so each record is wanted by one stream). A schema should add one
validation per record whatever N is; a key filter should cost about the same
whatever N is.

    python bench/ingest.py --clients 100,1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lib.sinks import TakingSink
from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.core.schemas import SchemaCheck, schema_validator_compile
from streams.fanout.access import BacklogRead, BatchDeliver, LiveFeed
from streams.fanout.cache import CacheLimits
from streams.fanout.hub import TopicHub
from streams.fanout.kafka import KafkaUnavailable, PartitionEnd, RecordMake
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions

SCHEMA = {"type": "object", "required": ["seq"], "properties": {"seq": {"type": "integer"}, "pad": {"type": "string"}}}


class NoCluster:
    """The hub's access and readers where nothing reaches Kafka: every stream is live, batches are handed in."""

    executor = None
    timeout = 1.0

    def __init__(self) -> None:
        self.backlog_slots = asyncio.Semaphore(1)

    def partitions(self, topic: str) -> list[int]:
        raise self.unavailable("no cluster in this benchmark")

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        raise self.unavailable("no cluster in this benchmark")

    def offsets_for_time(self, topic: str, partitions: Iterable[int], timestamp_ms: int) -> dict[int, int]:
        raise self.unavailable("no cluster in this benchmark")

    def unavailable(self, detail: str) -> KafkaUnavailable:
        return KafkaUnavailable(detail)

    def live(self, topic: str, start: dict[int, int], deliver: BatchDeliver, record_make: RecordMake) -> LiveFeed:
        raise self.unavailable("no cluster in this benchmark")

    def backlog(self, topic: str, record_make: RecordMake) -> BacklogRead:
        raise self.unavailable("no cluster in this benchmark")


def hub_make(partitions: int) -> TopicHub:
    """A hub level at offset 0 of each partition, never started: the benchmark hands it its batches."""
    cluster = NoCluster()
    hub = TopicHub("bench", cluster, CacheLimits(max_messages=5000, max_bytes=1 << 30), readers=cluster)
    hub.partitions = list(range(partitions))
    hub.next = dict.fromkeys(hub.partitions, 0)
    hub.cache.reset(dict.fromkeys(hub.partitions, 0))
    return hub


async def per_record_us(
    clients: int,
    topic_schema: SchemaCheck | None,
    route_schema: SchemaCheck | None,
    batches: int,
    size: int,
    keyed: bool = False,
) -> float:
    hub = hub_make(3)
    hub.schema = topic_schema
    for n in range(clients):
        sink = TakingSink(1 << 30)
        filters = FilterSet((MessageFilter(key=b"k%d" % n),)) if keyed else FilterSet()
        sub = Subscriber(sink, SubscriberOptions(filters=filters, schema=route_schema, route="/bench"))
        hub.subscribe(sub, StartPlan(dict(hub.next)), 2000)
    offsets = dict.fromkeys(range(3), 0)
    count = 0
    elapsed = 0.0
    for _ in range(batches):
        batch: list[Record | PartitionEnd] = []
        stamp = int(time.time() * 1000)  # a Kafka timestamp, as fetched records have (the lag is observed)
        for _ in range(size):
            p = count % 3
            value = json.dumps({"seq": count, "pad": "x" * 180}).encode()
            key = b"k%d" % (count % clients) if keyed else None
            batch.append(Record(p, offsets[p], stamp, key, value))
            offsets[p] += 1
            count += 1
        started = time.perf_counter()
        hub.ingest(batch)
        elapsed += time.perf_counter() - started
    return elapsed / count * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="100,1000", help="Live streams; comma list.")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="Runs per case; the best is shown.")
    args = parser.parse_args()
    schema = schema_validator_compile("bench", SCHEMA)
    print("| clients | no schema | topic schema | route schema | a key filter each |\n|---:|---:|---:|---:|---:|")
    for clients in (int(c) for c in args.clients.split(",")):
        cells = []
        for topic_schema, route_schema, keyed in (
            (None, None, False),
            (schema, None, False),
            (None, schema, False),
            (None, None, True),
        ):
            runs = [
                await per_record_us(clients, topic_schema, route_schema, args.batches, args.batch_size, keyed)
                for _ in range(args.repeat)
            ]
            cells.append(f"{min(runs):.1f} µs")
        print(f"| {clients} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    asyncio.run(main())
