"""What every fault scenario shares: a producer that keeps a ledger, and clients that resume like browsers.

The producer writes ``{"seq":n,"ts":ns}`` to partition ``n % 3`` with header
``group`` = ``a``/``b`` (``n % 2``) and records, from Kafka's delivery reports,
at which offset each message landed. A :class:`ResumingClient` is an
``EventSource``: it reads one response at a time over a raw socket, and when
the response ends (cleanly or not) or the connection cannot be made, it comes
back with the last id it saw. At the end, :func:`ledger_check` holds what each
client received against what was produced for its filter: nothing lost,
nothing twice, and per partition in offset order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer

from streams.core.ids import progress_decode
from tests.support.polling import condition_wait_async

PARTITIONS = 3
GROUPS = ("a", "b")
RETRY_SECONDS = 0.25  # how soon a client comes back, like EventSource's retry (with jitter)


class LedgerProducer(threading.Thread):
    """Produces until stopped, ``rate`` messages a second, and remembers where each one landed."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 40.0, pad: int = 0) -> None:
        super().__init__(daemon=True, name=f"producer-{topic}")
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 2, "log_level": 0, "message.timeout.ms": 120_000}
        )
        self.topic = topic
        self.rate = rate
        self.pad = "x" * pad
        self.sent = 0
        # partition -> [(offset, seq)], from the delivery reports
        self.delivered: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._halt.is_set():
            seq = self.sent
            value = json.dumps({"seq": seq, "ts": time.time_ns(), "pad": self.pad}, separators=(",", ":"))
            self.producer.produce(
                self.topic,
                value=value.encode(),
                key=f"k{seq % 17}".encode(),
                partition=seq % PARTITIONS,
                headers=[("group", GROUPS[seq % 2].encode())],
                on_delivery=self._delivered(seq),
            )
            self.sent += 1
            self.producer.poll(0)
            next_at += interval
            self._halt.wait(max(0.0, next_at - time.monotonic()))

    def _delivered(self, seq: int) -> Callable[..., None]:
        def report(error: object, message: object) -> None:
            if error is not None:
                self.errors.append(f"{seq}: {error}")
                return
            self.delivered[message.partition()].append((message.offset(), seq))  # type: ignore[attr-defined]

        return report

    def finish(self, timeout: float = 120.0) -> int:
        """Stop producing, wait for every delivery report; how many were delivered."""
        self._halt.set()
        self.join(timeout)
        remaining = self.producer.flush(timeout)
        assert remaining == 0, f"{remaining} messages not delivered"
        assert not self.errors, self.errors[:5]
        return sum(len(v) for v in self.delivered.values())

    def expected(self, group: str | None) -> dict[int, list[int]]:
        """Per partition, the seqs a client with this filter must receive, in offset order."""
        out: dict[int, list[int]] = {}
        for partition, landed in self.delivered.items():
            out[partition] = [seq for _, seq in sorted(landed) if group is None or GROUPS[seq % 2] == group]
        return out


@dataclass
class ClientStats:
    sessions: int = 0
    clean_ends: int = 0  # responses that ended with the chunked terminator
    abrupt_ends: int = 0  # connections lost mid-response
    refused: int = 0  # could not connect
    statuses: dict[int, int] = field(default_factory=dict)
    heartbeats: int = 0
    max_recovery: float = 0.0  # longest time from a lost stream to the next 200


class ResumingClient:
    """One browser-like client: reconnects with ``Last-Event-ID`` until told to stop."""

    def __init__(
        self,
        port: int,
        path: str,
        group: str | None,
        read_delay: float = 0.0,
        fast_after_cut: bool = False,
        honour_retry: bool = False,
    ) -> None:
        self.port = port
        # After a clean end, wait the last `retry:` the stream sent (as EventSource does), not RETRY_SECONDS.
        self.honour_retry = honour_retry
        self.retry_ms: int | None = None
        self.clean_end_at: float | None = None
        # Per reopened stream after a clean end: (when the last one ended, when this one got its 200), monotonic.
        self.reopened: list[tuple[float, float]] = []
        self.fast_after_cut = fast_after_cut  # a slow reader that, once cut, reads at full speed
        self.cut_at: float | None = None
        self.path = path
        self.group = group
        self.read_delay = read_delay  # seconds to wait between 1 KB reads (a slow reader); 0 = as fast as it can
        self.last_id: str | None = None
        self.received: list[int] = []
        # Per event received, the record of the log it came from (None: its id says no offset).
        self.records: list[tuple[int, int] | None] = []
        self.latencies: list[tuple[float, float]] = []  # (receipt wall time, latency seconds)
        self.stats = ClientStats()
        self.stopping = False
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lost_at: float | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self.stopping = True
        if self._writer is not None:
            self._writer.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def has_all(self, expected: dict[int, list[int]]) -> bool:
        wanted = sum(len(v) for v in expected.values())
        return len(set(self.received)) >= wanted

    async def _run(self) -> None:
        while not self.stopping:
            try:
                await self._session()
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.stats.abrupt_ends += 1
                if self.fast_after_cut and self.cut_at is None:
                    self.read_delay = 0.0
                    self.cut_at = time.time()
            finally:
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            if self._lost_at is None:
                self._lost_at = time.monotonic()
            self.connected.clear()
            if self.honour_retry and self.retry_ms is not None and self.clean_end_at is not None:
                await asyncio.sleep(self.retry_ms / 1000)
            else:
                await asyncio.sleep(RETRY_SECONDS * (0.5 + random.random()))

    async def _session(self) -> None:
        try:
            reader, writer = await self._connect()
        except OSError:
            self.stats.refused += 1
            return
        self._writer = writer
        head = f"GET {self.path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
        if self.last_id is not None:
            head += f"last-event-id: {self.last_id}\r\n"
        writer.write((head + "\r\n").encode())
        await writer.drain()
        response = await reader.readuntil(b"\r\n\r\n")
        status = int(response.split(b" ", 2)[1])
        self.stats.statuses[status] = self.stats.statuses.get(status, 0) + 1
        if status != 200:
            return
        self.stats.sessions += 1
        if self.clean_end_at is not None:
            self.reopened.append((self.clean_end_at, time.monotonic()))
            self.clean_end_at = None
        if self._lost_at is not None:
            self.stats.max_recovery = max(self.stats.max_recovery, time.monotonic() - self._lost_at)
            self._lost_at = None
        self.connected.set()
        buffer = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line[:-2], 16)
            if size == 0:
                await reader.readexactly(2)
                self.stats.clean_ends += 1
                self._lost_at = self.clean_end_at = time.monotonic()
                return
            chunk = await self._read(reader, size + 2)
            buffer += chunk[:-2]
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                self._frame(frame)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.read_delay:
            return await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        # A slow reader: a small receive window (set before connecting) and small reads.
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.port))
        except OSError:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock, limit=1024)

    async def _read(self, reader: asyncio.StreamReader, count: int) -> bytes:
        if not self.read_delay:
            return await reader.readexactly(count)
        out = b""
        while len(out) < count:
            out += await reader.readexactly(min(1024, count - len(out)))
            await asyncio.sleep(self.read_delay)
        return out

    def _frame(self, frame: bytes) -> None:
        data: list[bytes] = []
        for line in frame.split(b"\n"):
            if line.startswith(b":"):
                self.stats.heartbeats += 1
            elif line.startswith(b"retry: "):
                self.retry_ms = int(line[7:])
            elif line.startswith(b"id: "):
                self.last_id = line[4:].decode()
            elif line.startswith(b"data: "):
                data.append(line[6:])
        if data:
            message = json.loads(b"\n".join(data))
            self.received.append(message["seq"])
            self.records.append(record_of(self.last_id, message["seq"] % PARTITIONS))
            now = time.time()
            self.latencies.append((now, now - message["ts"] / 1e9))


def record_of(event_id: str | None, partition: int) -> tuple[int, int] | None:
    """The (partition, offset) of the record an event carries, from its progress id (None: another id form)."""
    if event_id is None:
        return None
    try:
        positions = progress_decode(event_id)
    except ValueError:  # not a progress token
        return None
    return (partition, positions[partition] - 1) if partition in positions else None


@dataclass
class Verdict:
    messages: int  # events checked over every client
    lost: int
    duplicated: int  # a record of the log delivered to a client more than once
    out_of_order: int
    # Records the producer wrote to the log twice (a retry after a connection dropped with its
    # request applied but unanswered): each copy is a record of its own, delivered once.
    written_twice: int = 0


def ledger_check(clients: list[ResumingClient], producer: LedgerProducer) -> Verdict:
    """Hold each client's events against the ledger for its filter."""
    expectations = {group: producer.expected(group) for group in (None, *GROUPS)}
    lost = duplicated = out_of_order = messages = written_twice = 0
    for client in clients:
        expected = expectations[client.group]
        messages += len(client.received)
        repeated_seqs = len(client.received) - len(set(client.received))
        records = client.records
        if all(record is not None for record in records):
            # A seq seen twice is Sluice's repeat only if it came from the same record of the log.
            repeated = len(records) - len(set(records))
            duplicated += repeated
            written_twice += repeated_seqs - repeated
        else:
            duplicated += repeated_seqs
        got = set(client.received)
        lost += sum(1 for seqs in expected.values() for seq in seqs if seq not in got)
        for partition, seqs in expected.items():
            # The partition is seq % 3 by construction; first arrivals only, in order.
            seen: list[int] = []
            firsts: set[int] = set()
            for seq in client.received:
                if seq % PARTITIONS == partition and seq not in firsts:
                    firsts.add(seq)
                    seen.append(seq)
            if seen != [s for s in seqs if s in firsts]:
                out_of_order += 1
    return Verdict(messages, lost, duplicated, out_of_order, written_twice)


async def clients_start(
    port: int, paths: list[tuple[str, str | None]], *, within: float = 60.0, honour_retry: bool = False
) -> list[ResumingClient]:
    """Start a client per ``(path, group)`` and wait until each has its first response open."""
    clients = [ResumingClient(port, path, group, honour_retry=honour_retry) for path, group in paths]
    for client in clients:
        client.start()
    await condition_wait_async(
        lambda: all(c.connected.is_set() for c in clients),
        within=within,
        what=lambda: f"{sum(c.connected.is_set() for c in clients)}/{len(clients)} clients connected",
    )
    return clients


async def clients_caught_up(clients: list[ResumingClient], producer: LedgerProducer, *, within: float = 90.0) -> None:
    expectations = {group: producer.expected(group) for group in (None, *GROUPS)}
    await condition_wait_async(
        lambda: all(c.has_all(expectations[c.group]) for c in clients),
        within=within,
        what=lambda: f"{sum(c.has_all(expectations[c.group]) for c in clients)}/{len(clients)} clients complete",
        interval=0.2,
    )


async def clients_stop(clients: list[ResumingClient]) -> None:
    await asyncio.gather(*(c.stop() for c in clients))


async def produced_past(producer: LedgerProducer, count: int, *, within: float = 60.0) -> None:
    """Wait until ``count`` more messages have been delivered (the producer runs on its own)."""
    target = sum(len(v) for v in producer.delivered.values()) + count
    await condition_wait_async(
        lambda: sum(len(v) for v in producer.delivered.values()) >= target,
        within=within,
        what=f"{count} more messages delivered",
    )
