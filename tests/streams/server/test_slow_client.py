"""A client that stops reading is cut and costs bounded memory; it then resumes without loss (SPEC 2.5).

Real broker, a gateway process of its own (so its RSS is this test's alone),
and three clients on one topic: one that stops reading after a few events
(plain socket with a tiny receive buffer), one that reads everything as fast
as it can, and, after the cut, one that resumes from the last id the slow
client had parsed.
"""

from __future__ import annotations

import asyncio
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
from tests.support.metrics_scrape import metric_wait, metrics_read
from tests.support.polling import condition_wait_async
from tests.support.progress import progress_advance
from tests.support.raw_stream import small_window_stream
from tests.support.sse_client import Event, EventParser

pytestmark = pytest.mark.slow

PARTITIONS = 3
VALUE_BYTES = 8 * 1024
BULK_MESSAGES = 6000  # 6000 x 8 KiB: about 48 MiB through the gateway
MAX_PENDING_BYTES = 256 * 1024
CACHE_MAX_BYTES = 4 * 1024 * 1024
# What the gateway may grow by while all of that flows: the cache (4 MiB counted,
# a few times that in Python objects and shared frames), the slow client's
# pending bytes, one fetch batch, allocator slack. Buffering for the slow client
# instead of cutting it would cost the whole 48 MiB and more.
RSS_BOUND_BYTES = 32 * 1024 * 1024
# The producer stays at most this many messages ahead of the fast client, so the
# fast client is never further behind than its own limit and is never cut.
FAST_WINDOW = 24
DEADLINE = 120.0


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class RssWatch:
    """Samples a process's resident set size in a thread, keeping the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = rss_bytes(pid)
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.peak = max(self.peak, rss_bytes(self.pid))


class Dechunker:
    """HTTP/1.1 chunked transfer decoding, incremental (the slow client talks raw HTTP)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0  # bytes of the current chunk still to come, then its CRLF

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = bytearray()
        while self._buffer:
            if self._left:
                take = self._buffer[: self._left]
                out += take
                self._left -= len(take)
                self._buffer = self._buffer[len(take) :]
                continue
            if self._buffer.startswith(b"\r\n"):
                self._buffer = self._buffer[2:]
                continue
            line, sep, rest = self._buffer.partition(b"\r\n")
            if not sep:
                break
            self._left = int(line.split(b";")[0], 16)
            self._buffer = rest
        return bytes(out)


class Received:
    """Everything one client parsed: ``(partition, offset, seq)`` per data event, via the ids."""

    def __init__(self, start_id: str | None = None) -> None:
        self.parser = EventParser()
        self.position = event_id_parse(start_id).progress if start_id else None
        self.messages: list[tuple[int, int, int]] = []
        self.last_id = start_id

    def feed(self, body: bytes) -> list[Event]:
        events = self.parser.feed(body)
        for event in events:
            assert event.id is not None
            progress = event_id_parse(event.id).progress
            if event.has_data:
                partition, offset = progress_advance(self.position, progress, event.id)
                payload = json.loads(event.data)
                assert payload["partition"] == partition
                self.messages.append((partition, offset, payload["seq"]))
            self.position = progress
            self.last_id = event.id
        return events


class SlowClient:
    """GET over a socket with a tiny receive buffer; reads a few events, then stops reading."""

    def __init__(self, port: int, path: str) -> None:
        self.sock, self.head, rest = small_window_stream(port, path, DEADLINE)
        self.dechunker = Dechunker()
        self.received = Received()
        self.received.feed(self.dechunker.feed(rest))

    def read_events(self, count: int) -> None:
        while len(self.received.messages) < count:
            data = self.sock.recv(4096)
            assert data, "the gateway closed the slow client early"
            self.received.feed(self.dechunker.feed(data))

    def wait_closed(self) -> str:
        """Read (and drop) whatever is left until the gateway's reset or close arrives."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            return "reset"
        return "closed"

    def close(self) -> None:
        self.sock.close()


class BulkProducer(threading.Thread):
    """Produces keyed ~8 KiB messages, never more than ``window`` ahead of ``reader()``."""

    def __init__(self, bootstrap: str, topic: str, count: int, first_seq: int, reader: Callable[[], int]) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
        self.topic = topic
        self.count = count
        self.first_seq = first_seq
        self.reader = reader
        self.produced = 0
        self.bytes = 0
        self.progress = threading.Condition()
        self.error: BaseException | None = None
        self.stopping = False

    def run(self) -> None:
        try:
            filler = "x" * VALUE_BYTES
            seq = self.first_seq
            while self.produced < self.count and not self.stopping:
                with self.progress:
                    if not self.progress.wait_for(
                        lambda: self.stopping or self.produced - self.reader() < FAST_WINDOW, timeout=DEADLINE
                    ):
                        raise TimeoutError("the fast client stopped reading")
                batch = min(FAST_WINDOW - (self.produced - self.reader()), self.count - self.produced)
                for _ in range(max(batch, 0)):
                    value = json.dumps({"seq": seq, "partition": seq % PARTITIONS, "fill": filler}).encode()
                    self.producer.produce(self.topic, value=value, key=f"k{seq}".encode(), partition=seq % PARTITIONS)
                    self.bytes += len(value)
                    seq += 1
                assert self.producer.flush(30) == 0
                self.produced += max(batch, 0)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def nudge(self) -> None:
        with self.progress:
            self.progress.notify_all()


async def test_slow_client_is_cut_memory_stays_bounded_and_resume_loses_nothing(
    own_gateway: Gateway, kafka: Kafka, route: Any
) -> None:
    """Stalled client: cut, with the gateway's RSS bounded; a fast client meanwhile loses nothing; resume is whole."""
    topic = kafka.topic(partitions=PARTITIONS, prefix="slow")
    topic_upsert(name=topic, cache_max_bytes=CACHE_MAX_BYTES)
    path = f"/slow/{topic}"
    route(path=path, topic=topic, initial="earliest", max_pending_bytes=MAX_PENDING_BYTES)
    assert own_gateway.process is not None
    pid = own_gateway.process.pid

    for seq in range(5):
        kafka.produce(
            topic, json.dumps({"seq": seq, "partition": seq % PARTITIONS}), key=f"k{seq}", partition=seq % PARTITIONS
        )

    async with httpx.AsyncClient(base_url=own_gateway.url, timeout=httpx.Timeout(30.0, read=None)) as http:
        slow = await asyncio.to_thread(SlowClient, own_gateway.port, path)
        await asyncio.to_thread(slow.read_events, 5)
        slow_last_id = slow.received.last_id
        assert slow_last_id is not None
        # From here on the slow client reads nothing until the gateway has cut it.

        fast = Received()
        producer: BulkProducer | None = None
        total = 5 + BULK_MESSAGES

        async def read_fast() -> None:
            async with http.stream("GET", path) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    fast.feed(chunk)
                    if producer is not None:
                        producer.nudge()
                    if len(fast.messages) >= total:
                        return
            raise AssertionError("the fast client's stream ended")

        fast_task = asyncio.create_task(read_fast())
        await metric_wait(http, "sluice_subscribers", topic, lambda v: v == 2, within=DEADLINE)
        await condition_wait_async(
            lambda: len(fast.messages) >= 5, within=DEADLINE, what="the fast client's first events"
        )

        started = time.monotonic()
        with RssWatch(pid) as rss:
            producer = BulkProducer(kafka.bootstrap, topic, BULK_MESSAGES, 5, lambda: len(fast.messages) - 5)
            producer.start()
            await metric_wait(http, "sluice_slow_clients_cut_total", topic, lambda v: v >= 1, within=DEADLINE)
            cut_after = producer.produced
            await asyncio.wait_for(fast_task, timeout=DEADLINE * 2)
            await asyncio.to_thread(producer.join, DEADLINE)
        assert producer.error is None, producer.error
        elapsed = time.monotonic() - started

        how = await asyncio.wait_for(asyncio.to_thread(slow.wait_closed), timeout=DEADLINE)
        slow.close()
        metrics = await metrics_read(http, topic)
        assert metrics.get("sluice_slow_clients_cut_total", 0.0) == 1  # the slow one, never the fast one

        growth = rss.peak - rss.baseline
        deferred = metrics.get("sluice_slow_clients_deferred_total", 0.0)
        print(
            f"\nslow client: produced {producer.bytes / 2**20:.1f} MiB in {elapsed:.1f}s; cut seen after "
            f"{cut_after} messages ({how}; {deferred:.0f} deferrals); RSS baseline {rss.baseline / 2**20:.1f} MiB, "
            f"peak {rss.peak / 2**20:.1f} MiB (+{growth / 2**20:.1f} MiB, bound {RSS_BOUND_BYTES / 2**20:.0f} MiB)"
        )
        assert growth < RSS_BOUND_BYTES

        # The fast client got everything, in order, once.
        by_partition: dict[int, list[int]] = {}
        for partition, _, seq in fast.messages:
            by_partition.setdefault(partition, []).append(seq)
        assert sorted(seq for _, _, seq in fast.messages) == list(range(total))
        for partition, seqs in by_partition.items():
            assert seqs == sorted(seqs), f"partition {partition} out of order"

        # A new client resumes from the slow client's last parsed id and gets all the rest.
        start = event_id_parse(slow_last_id).progress
        expected = sorted((p, o, s) for p, o, s in fast.messages if o >= start[p])
        assert len(expected) == total - len(slow.received.messages)
        resumed = Received(slow_last_id)
        resume_started = time.monotonic()

        async def read_resumed() -> None:
            headers = {"Last-Event-ID": slow_last_id}
            async with http.stream("GET", path, headers=headers) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    resumed.feed(chunk)
                    if len(resumed.messages) >= len(expected):
                        return
            raise AssertionError("the resumed stream ended")

        await asyncio.wait_for(read_resumed(), timeout=DEADLINE * 2)
        resume_seconds = time.monotonic() - resume_started
        print(f"resume from the slow client's last id: {len(resumed.messages)} events in {resume_seconds:.1f}s")
        assert sorted(resumed.messages) == expected  # Received checked order and contiguity per partition
