"""A keyed resume from a topic's cache, in process (no broker, no sockets): microseconds per catch-up.

Fills a 3-partition topic cache with ``--records`` records keyed round-robin over
``--keys`` keys (a key stays on one partition, as Kafka's partitioner keeps it),
then runs one stream's catch-up (``CatchUp``) with a filter on one key from the
start of the cache to the hub's position, ``--runs`` times over the keys, and
prints microseconds per catch-up (the frames are built once, before the timing).
With ``--memory`` it also prints what the cache's key index costs per cached
record (tracemalloc), for keys shared by many records, distinct keys and no keys.

    python bench/keyed_catchup.py --records 20000 --keys 200 --runs 400 --memory
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lib.procstats import loadavg
from bench.lib.sinks import TakingSink
from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.fanout.cache import CacheLimits, TopicCache
from streams.fanout.catchup import CatchUp
from streams.fanout.catchup_reads import BacklogSession
from streams.fanout.cutoffs import loop_cutoffs
from streams.fanout.state import HubState
from streams.fanout.subscriber import Subscriber, SubscriberOptions

PARTITIONS = 3


class Control:
    """The hub as a catch-up sees it: the stream goes live, nothing else happens."""

    def go_live(self, sub: Subscriber) -> None:
        sub.positions = None

    def demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        raise AssertionError("not in a catch-up")

    def cut(self, sub: Subscriber) -> None:
        raise AssertionError("the sink takes everything")

    def log_restart(self, partition: int, offset: int) -> None:
        raise AssertionError("not in a catch-up")

    def unsubscribe(self, sub: Subscriber) -> None:
        return None


def records_made(count: int, keys: int | None) -> list[Record]:
    """Record n: key ``k<n % keys>`` (None: keyless, 0: distinct keys) on that key's partition, 200-byte JSON."""
    made = []
    offsets = [0] * PARTITIONS
    for n in range(count):
        if keys is None:
            key, partition = None, n % PARTITIONS
        else:
            number = n % keys if keys else n
            key, partition = b"k%d" % number, number % PARTITIONS
        value = b'{"s":%d,"pad":"%s"}' % (n, b"x" * 180)
        made.append(Record(partition, offsets[partition], 1_000_000 + n, key, value))
        offsets[partition] += 1
    return made


def cache_made(records: list[Record]) -> TopicCache:
    cache = TopicCache(CacheLimits(max_messages=len(records) + 1, max_bytes=1 << 40))
    cache.reset(dict.fromkeys(range(PARTITIONS), 0))
    for record in records:
        cache.append(record)
    return cache


def state_made(records: list[Record]) -> HubState:
    state = HubState("bench", cache_made(records), loop_cutoffs())
    state.partitions = list(range(PARTITIONS))
    state.positions_reset({p: len(state.cache[p]) for p in state.partitions})
    return state


async def catch_up(state: HubState, key: bytes) -> int:
    sink = TakingSink()
    sub = Subscriber(sink, SubscriberOptions(filters=FilterSet((MessageFilter(key=key),))))
    sub.positions = dict.fromkeys(state.partitions, 0)
    reads = BacklogSession(state.topic, None, None, Record.from_kafka)  # type: ignore[arg-type]
    await CatchUp(state, Control(), sub, reads).run(False)
    assert sub.positions is None, "the stream went live"
    return sink.written


async def timed(args: argparse.Namespace) -> None:
    records = records_made(args.records, args.keys)
    state = state_made(records)
    keys = [b"k%d" % n for n in range(args.keys)]
    for key in keys:  # every record's frame built once, as the live fan-out leaves them
        await catch_up(state, key)
    gc.collect()
    gc.freeze()
    per_round = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for n in range(args.runs):
            await catch_up(state, keys[n % len(keys)])
        per_round.append((time.perf_counter() - started) / args.runs * 1e6)
    wanted = args.records // args.keys
    print(
        f"{args.records} cached records, {args.keys} keys (~{wanted} records of the key), "
        f"{args.runs} catch-ups a round: "
        f"µs per catch-up by round {', '.join(f'{us:.0f}' for us in per_round)}; "
        f"median {statistics.median(per_round):.0f}"
    )


def memory(args: argparse.Namespace) -> None:
    from streams.fanout.keyindex import KeyIndex

    for label, keys in ((f"{args.keys} keys", args.keys), ("distinct keys", 0), ("no keys", None)):
        records = records_made(args.records, keys)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        indexes = [KeyIndex() for _ in range(PARTITIONS)]
        for record in records:
            indexes[record.partition].add(record)
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        cache_records = records_made(args.records, keys)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cache = cache_made(cache_records)
        whole = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        del cache, indexes
        print(
            f"index, {label}: {held / args.records:.1f} bytes per cached record "
            f"(the cache with its index: {whole / args.records:.1f} bytes per record beside the records themselves)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--runs", type=int, default=400, help="Catch-ups a round.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="Also the key index's memory per cached record.")
    args = parser.parse_args()
    print(f"load average {loadavg()}")
    asyncio.run(timed(args))
    if args.memory:
        memory(args)
    print(f"load average {loadavg()}")


if __name__ == "__main__":
    main()
