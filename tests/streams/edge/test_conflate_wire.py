"""Conflation by key end to end: a real gateway and broker, streams read as a browser (or a stalled socket) reads them.

Each value says which key and version it is and where it was produced (partition and offset), so a test can
tell what a stream was sent from what it was owed.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from streams.core.ids import progress_decode
from streams.services import topic_upsert
from tests.streams.edge.test_wire import QUIET, WAIT, Stream, open_stream
from tests.streams.server.test_slow_client import Dechunker
from tests.support.metrics_scrape import metric_wait
from tests.support.raw_stream import small_window_stream
from tests.support.sse_client import Event, EventParser


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


class Ticker:
    """Produces versions of keys, each value naming its key, version, partition and offset."""

    def __init__(self, kafka: Any, topic: str, partitions: int, pad: int = 0) -> None:
        self.kafka, self.topic, self.partitions, self.pad = kafka, topic, partitions, "x" * pad
        self.offsets = [0] * partitions
        self.version: dict[str, int] = {}
        self.latest: dict[str, dict[str, Any] | None] = {}  # None: the key's last record was a tombstone
        self.bytes = 0

    def produce(self, key: str, tombstone: bool = False) -> None:
        p = int(key[1:]) % self.partitions
        version = self.version[key] = self.version.get(key, 0) + 1
        value = {"k": key, "v": version, "p": p, "o": self.offsets[p], "pad": self.pad}
        self.offsets[p] += 1
        self.latest[key] = None if tombstone else value
        payload = None if tombstone else json.dumps(value)
        self.bytes += len(payload or "")
        self.kafka.produce(self.topic, payload, key=key, partition=p, flush=False)

    async def rounds(self, keys: int, rounds: int, pause: float = 0.02) -> None:
        """``rounds`` versions of keys k0..k<keys-1>, on a thread: the streams are read meanwhile."""

        def run() -> None:
            for _ in range(rounds):
                for n in range(keys):
                    self.produce(f"k{n}")
                self.kafka.flush()
                time.sleep(pause)

        await asyncio.to_thread(run)


def seen(events: list[Event]) -> dict[str, dict[str, Any] | None]:
    """The last value each key had in ``events`` (None after a ``delete``)."""
    out: dict[str, dict[str, Any] | None] = {}
    for event in events:
        if event.type == "delete":
            out[bytes_key(event.data)] = None
        elif event.has_data:
            value = json.loads(event.data)
            out[value["k"]] = value
    return out


def bytes_key(data: str) -> str:
    import base64

    return base64.urlsafe_b64decode(data).decode()


def conflated_total(text: str, route: str) -> float:
    found = re.search(rf'^sluice_conflated_records_total\{{route="{re.escape(route)}",[^}}]*\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_a_capped_stream_gets_at_most_max_rate_events_a_key_each_second_and_the_latest_of_every_key(
    client, kafka, route
) -> None:
    topic = kafka.topic(partitions=2)
    path = f"/cf/cap/{topic}"
    route(path=path, topic=topic, conflate="key", conflate_max_rate=5, heartbeat_seconds=QUIET)
    ticker = Ticker(kafka, topic, 2)
    arrivals: dict[str, list[float]] = {}
    async with open_stream(client, path) as stream:
        await stream.started()
        producing = asyncio.create_task(ticker.rounds(keys=10, rounds=60))  # 60 versions of each key, a second or more

        def caught_up(s: Stream) -> bool:  # every key at its last version (known before it is produced)
            return [(value or {}).get("v") for value in seen(s.events).values()] == [60] * 10

        async def note() -> None:
            count = 0
            while True:
                await stream.read_until(lambda s, c=count: len(s.messages) > c)
                now = time.monotonic()
                for event in stream.messages[count:]:
                    arrivals.setdefault(json.loads(event.data)["k"], []).append(now)
                count = len(stream.messages)
                if caught_up(stream):
                    return

        await asyncio.wait_for(note(), WAIT)
        await producing
    # At most 5 writes a second, one event per key each: 5 events of a key in any second (one more
    # for a write the network delayed into the next one), where the lossless stream gets 60.
    for key, times in arrivals.items():
        most = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
        assert most <= 6, (key, most, len(times))
    assert sum(len(times) for times in arrivals.values()) < 10 * 60 / 2
    # Each event's id is its record's position: the progress after the last one is the log's end.
    assert progress_decode(stream.messages[-1].id or "") == {0: ticker.offsets[0], 1: ticker.offsets[1]}
    assert conflated_total((await client.get("/metrics")).text, path) > 0


async def test_tombstones_are_never_conflated_away(client, kafka, route) -> None:
    topic = kafka.topic()
    path = f"/cf/tomb/{topic}"
    route(path=path, topic=topic, conflate="key", conflate_max_rate=2, heartbeat_seconds=QUIET)
    ticker = Ticker(kafka, topic, 1)
    async with open_stream(client, path) as stream:
        await stream.started()
        for key, tombstone in [("k1", False), ("k2", False), ("k1", True), ("k2", False), ("k1", False)]:
            ticker.produce(key, tombstone)  # all within one write's interval: k1's tombstone and its new value
        ticker.produce("k3", tombstone=True)  # a key whose last word is its tombstone
        kafka.flush()
        await stream.read_until(lambda s: seen(s.events) == ticker.latest and len(s.events) > 3)
    deletes = [bytes_key(e.data) for e in stream.events if e.type == "delete"]
    assert deletes == ["k1", "k3"]
    k1 = [e for e in stream.messages if (e.type == "delete" and bytes_key(e.data) == "k1") or '"k": "k1"' in e.data]
    assert [e.type for e in k1][-2:] == ["delete", "message"]  # the tombstone, then the value after it


async def test_resume_after_a_conflated_stretch_is_exact(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    path = f"/cf/resume/{topic}"
    route(path=path, topic=topic, conflate="key", conflate_max_rate=4, heartbeat_seconds=QUIET)
    ticker = Ticker(kafka, topic, 2)
    rng = random.Random(31)
    async with open_stream(client, path) as first:
        await first.started()
        await ticker.rounds(keys=12, rounds=30)
        cut_after = rng.randrange(3, 12)
        await first.read_until(lambda s: len(s.messages) >= cut_after)
    before = first.messages[:cut_after]
    last_id = before[-1].id
    assert last_id is not None
    at = progress_decode(last_id)
    await ticker.rounds(keys=12, rounds=5)  # more while it is away
    async with open_stream(client, path, headers={"Last-Event-ID": last_id}) as second:
        await second.read_until(lambda s: seen(before + s.messages) == ticker.latest)
    sent_first = {(v["p"], v["o"]) for v in map(json.loads, (e.data for e in before))}
    sent_second = [(v["p"], v["o"]) for v in map(json.loads, (e.data for e in second.messages))]
    assert len(before) < 12 * 30  # the first stream was conflated
    # Nothing at or before the last id it had comes again: superseded records are not owed.
    assert all(o >= at[p] for p, o in sent_second)
    assert not sent_first & set(sent_second)
    # Nothing after it is missing: every key ends at its latest value (checked above), each record once.
    assert len(sent_second) == len(set(sent_second))


class StalledReader:
    """A raw GET over a socket with a tiny receive buffer, which reads only when told to."""

    def __init__(self, port: int, path: str) -> None:
        self.sock, self.head, rest = small_window_stream(port, path, WAIT)
        self.dechunker, self.parser = Dechunker(), EventParser()
        self.events: list[Event] = []
        self.bytes = 0
        self.feed(rest)

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        self.events += self.parser.feed(self.dechunker.feed(data))

    def read_until(self, condition: Any, within: float) -> None:
        deadline = time.monotonic() + within
        while not condition():
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            assert data, "the gateway closed the stream"
            self.feed(data)


async def test_a_slow_client_is_never_cut_and_sees_the_latest_of_every_key_within_a_second(
    client, kafka, route, gateway
) -> None:
    topic = kafka.topic(partitions=2)
    topic_upsert(name=topic, cache_max_messages=300)  # a lossless stream left behind falls out of it soon
    conflated, lossless = f"/cf/slow/{topic}", f"/cf/lossless/{topic}"
    for path, conflate in ((conflated, "key"), (lossless, "")):
        route(path=path, topic=topic, conflate=conflate, conflate_max_rate=10 if conflate else 0,
              max_pending_bytes=64 * 1024, heartbeat_seconds=1)  # fmt: skip
    slow = await asyncio.to_thread(StalledReader, gateway.port, conflated)
    stuck = await asyncio.to_thread(StalledReader, gateway.port, lossless)
    ticker = Ticker(kafka, topic, 2, pad=1000)
    # Both stop reading: 20 keys of 1 kB each, 150 versions each, 3 MB in all.
    await ticker.rounds(keys=20, rounds=150, pause=0.01)
    # The same client on a lossless route is cut (it resumes from its last id) ...
    await metric_wait(client, "sluice_slow_clients_cut_total", topic, lambda v: v >= 1, within=WAIT)
    # ... the conflated one is not: reading again, it has the latest value of every key within a second.
    started = time.monotonic()
    await asyncio.to_thread(slow.read_until, lambda: seen(slow.events) == ticker.latest, WAIT)
    took = time.monotonic() - started
    slow.sock.close()
    stuck.sock.close()
    print(f"\nconflated slow reader: {slow.bytes / 1024:.0f} kB of {ticker.bytes / 1024:.0f} kB produced; "
          f"the latest of every key {took * 1000:.0f} ms after it read again")  # fmt: skip
    assert slow.bytes < ticker.bytes / 4  # it missed most steps ...
    assert took < 1.0  # ... and caught up with the newest state at once
    metrics = (await client.get("/metrics")).text
    assert conflated_total(metrics, conflated) > 0
    # The conflated stream was open throughout (it read to the end above): only the lossless one was cut.
    assert f'sluice_slow_clients_cut_total{{topic="{topic}"}} 1.0' in metrics
