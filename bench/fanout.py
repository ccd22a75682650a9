"""Fan-out benchmark: N SSE clients on one topic, deliveries per second and end-to-end latency.

Starts everything it measures and stops it again: the embedded broker (tansu),
a gateway (``manage.py runstreams``) on a temporary SQLite database, a producer
in its own process, and an asyncio + uvloop load client in this process. All on
127.0.0.1; every run ends by itself (connect, produce and drain phases are all
bounded).

Each message is ``{"seq":n,"ts":<time.time_ns() at produce>,"pad":"..."}``; the
client parses ``seq`` and ``ts`` out of the ``data:`` line, so latency is from
the producer's ``produce()`` call (before the broker) to the client's receipt.

    python bench/fanout.py --clients 100,1000 --rate 1000,100 --duration 30 \\
        --output docs/benchmarks.md

CPU figures are percent of ONE core (the machine's capacity is nproc x 100 %).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import platform
import re
import resource
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.server.processes import process_stop  # noqa: E402  (needs the repository on the path)

ROUTE_PATH = "/bench/fanout"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Latency histogram: 100 us buckets up to 60 s (anything later lands in the last one).
BUCKET_NS = 100_000
BUCKETS = 600_000
SECTION_BEGIN = "<!-- bench/fanout.py results: begin -->"
SECTION_END = "<!-- bench/fanout.py results: end -->"
DATA_FIND = re.compile(rb'data: \{"seq":(\d+),"ts":(\d+)').findall


# -- process accounting ------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        text = handle.read()
    fields = text[text.rindex(b")") + 2 :].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``runstreams --workers N`` serves from child processes)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        parent = int(text[text.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += proc_cpu_seconds(pid)
    return total


def tree_rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += proc_rss_bytes(pid)
    return total


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def system_busy_seconds() -> float:
    """CPU seconds spent busy by the whole machine (all cores), from /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def loadavg() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def fd_limit_raise(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE up to the hard limit; the gateway inherits it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft < wanted:
        raise SystemExit(f"RLIMIT_NOFILE is {soft} (hard {hard}); {wanted} descriptors are needed")
    return soft


def machine_description() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError), open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    return f"{os.cpu_count()} cores ({model}){mem}, Linux {platform.release()}, Python {platform.python_version()}"


# -- producer (own process) ----------------------------------------------------------


def payload_make(seq: int, ts: int, size: int) -> bytes:
    head = b'{"seq":%d,"ts":%d,"pad":"' % (seq, ts)
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


def producer_main(
    conn: Any,
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: float,
    count: int,
    size: int,
    linger_ms: float,
    keys: int = 0,
) -> None:
    """Publish ``count`` messages at ``rate``/s, round-robin over partitions, once told to go.

    With ``keys``, message n has key ``k<n % keys>`` (bench/compare.py's key-filter scenario).
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "log_level": 0})
    producer.list_topics(topic, timeout=10)
    failed = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    conn.send("ready")
    if conn.recv() != "go":
        return
    cpu0 = self_cpu_seconds()
    start = time.perf_counter()
    behind = 0.0
    for seq in range(count):
        target = start + seq / rate
        delay = target - time.perf_counter()
        if delay > 0:
            # Not producer.poll(delay): it rounds to whole milliseconds and spins below one.
            time.sleep(delay)
        behind = max(behind, -delay)
        while True:
            try:
                producer.produce(
                    topic,
                    payload_make(seq, time.time_ns(), size),
                    key=b"k%d" % (seq % keys) if keys else None,
                    partition=seq % partitions,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    produced_in = time.perf_counter() - start
    unflushed = producer.flush(30)
    conn.send(
        {
            "seconds": produced_in,
            "failed": failed + unflushed,
            "cpu": self_cpu_seconds() - cpu0,
            "max_behind": behind,
        }
    )


def probe_main(conn: Any, bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """A bare Kafka consumer with the gateway's fetch settings: the latency of the broker path alone."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-probe-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    latencies: list[int] = []
    conn.send("ready")
    cpu0 = self_cpu_seconds()
    while len(latencies) < count and not conn.poll():
        # One blocking wait, then whatever is queued: no batch timeout added to the latency.
        messages = consumer.consume(1, 0.1)
        if not messages:
            continue
        messages += consumer.consume(1000, 0)
        now = time.time_ns()
        for message in messages:
            value = message.value()
            if message.error() is None and value:
                comma = value.index(b",")
                latencies.append(now - int(value[comma + 6 : value.index(b",", comma + 6)]))
    cpu = self_cpu_seconds() - cpu0
    consumer.close()
    latencies.sort()
    pick = (
        (lambda f: latencies[min(len(latencies) - 1, int(len(latencies) * f))] / 1e6) if latencies else (lambda f: 0.0)
    )
    conn.send({"count": len(latencies), "p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0), "cpu": cpu})


# -- load client ---------------------------------------------------------------------


@dataclass
class Stats:
    """What every client of one scenario adds to (one object, so the hot path stays local)."""

    hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    max_ns: int = 0
    events: int = 0
    last_ns: int = 0
    measuring: bool = False
    disconnects: int = 0
    # Per produce-second of the run: [events, latency sum, latency max] (for --timeline).
    per_second: list[list[int]] = field(default_factory=list)
    seq_per_second: int = 1
    timeline: bool = False
    reads: int = 0


class SseClient(asyncio.Protocol):
    """One stream over HTTP/1.1: chunked decoding and just enough SSE to find ``seq`` and ``ts``."""

    def __init__(self, request: bytes, stats: Stats, expected: int, ready_on_headers: bool = False) -> None:
        loop = asyncio.get_running_loop()
        # Peers that send nothing before the first event are ready once the response head arrived.
        self.ready_on_headers = ready_on_headers
        self.request = request
        self.stats = stats
        self.seen = bytearray(expected)
        # Distinct events this client should get (fewer than ``expected`` when it filters).
        self.want = expected
        self.unique = 0
        self.duplicates = 0
        self.status = 0
        self.head = b""
        self.chunked = False
        self.raw = b""
        self.text = b""
        self.ready: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.error: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stats.measuring:
            self.stats.disconnects += 1
        self._fail(f"connection lost: {exc}")
        if not self.done.done():
            self.done.set_result(None)

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(reason))

    def data_received(self, data: bytes) -> None:
        now = time.time_ns()
        self.stats.reads += 1
        if not self.status:
            head = self.head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self.head = head
                return
            self.head = b""
            self.status = int(head.split(b" ", 2)[1])
            if self.status != 200:
                self._fail(f"HTTP {self.status}: {head[:300]!r}")
                assert self.transport is not None
                self.transport.close()
                return
            self.chunked = b"transfer-encoding: chunked" in head[:end].lower()
            data = head[end + 4 :]
            if self.ready_on_headers and not self.ready.done():
                self.ready.set_result(None)
        if self.chunked:
            data = self._dechunk(data)
        if not data:
            return
        text = self.text + data if self.text else data
        end = text.rfind(b"\n\n")
        if end < 0:
            self.text = text
            return
        self.text = text[end + 2 :]
        if not self.ready.done():
            self.ready.set_result(None)
        # Complete events end before `end`; the data line of ours starts {"seq":N,"ts":T (see payload_make).
        # One findall over them is ~3x cheaper than splitting into events and finding each data line.
        found = DATA_FIND(text, 0, end)
        if not found:
            return  # the preamble, a checkpoint or a heartbeat
        stats = self.stats
        hist = stats.hist
        seen = self.seen
        per_second = stats.per_second if stats.timeline else None
        per_slot = stats.seq_per_second
        max_ns = stats.max_ns
        unique = 0
        for seq_text, ts_text in found:
            seq = int(seq_text)
            latency = now - int(ts_text)
            if latency > max_ns:
                max_ns = latency
            bucket = latency // BUCKET_NS
            if not 0 <= bucket < BUCKETS:  # a clock step; keep it out of the other end of the list
                bucket = 0 if bucket < 0 else BUCKETS - 1
            hist[bucket] += 1
            if seen[seq]:
                self.duplicates += 1
            else:
                seen[seq] = 1
                unique += 1
            if per_second is not None:
                slot = per_second[seq // per_slot]
                slot[0] += 1
                slot[1] += latency
                if latency > slot[2]:
                    slot[2] = latency
        stats.max_ns = max_ns
        stats.events += len(found)
        stats.last_ns = now
        self.unique += unique
        if self.unique >= self.want and not self.done.done():
            self.done.set_result(None)

    def _dechunk(self, data: bytes) -> bytes:
        buf = self.raw + data if self.raw else data
        out: list[bytes] = []
        pos = 0
        size_of = len(buf)
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            start = eol + 2
            stop = start + size
            if stop + 2 > size_of:
                break
            pos = stop + 2
            if size == 0:
                break
            out.append(buf[start:stop])
        self.raw = buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


async def clients_open(port: int, count: int, stats: Stats, expected: int, concurrency: int = 50) -> list[SseClient]:
    """Open ``count`` streams, at most ``concurrency`` at a time, each until its start checkpoint arrived."""
    loop = asyncio.get_running_loop()
    request = (
        f"GET {ROUTE_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        "Cache-Control: no-cache\r\n\r\n"
    ).encode()
    gate = asyncio.Semaphore(concurrency)
    clients: list[SseClient] = []

    async def one() -> None:
        async with gate:
            _, client = await loop.create_connection(lambda: SseClient(request, stats, expected), "127.0.0.1", port)
            clients.append(client)
            await asyncio.wait_for(client.ready, timeout=30)

    await asyncio.gather(*(one() for _ in range(count)))
    return clients


async def http_get(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    body = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    return body.decode("utf-8", "replace")


def metric_sum(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


# -- gateway -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """``manage.py runstreams --port 0`` on the benchmark's database and broker; output to a log file."""

    def __init__(
        self, database_url: str, bootstrap: str, log_path: Path, workers: int = 1, server: str = "daphne"
    ) -> None:
        self.workers = workers
        self.server = server
        self.env = dict(os.environ)
        self.env.update(
            {
                "DATABASE_URL": database_url,
                "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                "SLUICE_DEV": "1",
                # Every load client is on loopback.
                "SLUICE_MAX_STREAMS_PER_ADDRESS": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def command(self) -> list[str]:
        if self.server == "uvicorn":
            # The same ASGI application under uvicorn (uvloop, httptools), one process per worker.
            self.port = free_port()
            return [
                *(sys.executable, "-m", "uvicorn", "project.asgi:application"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)),
                *("--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning"),
                *("--backlog", "4096", "--timeout-graceful-shutdown", "5"),
            ]
        return [
            *(sys.executable, "-u", str(ROOT / "manage.py"), "runstreams"),
            *("--port", "0", "--workers", str(self.workers)),
        ]

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child keeps writing to it
        self.process = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server == "uvicorn":
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            else:
                text = self.log_path.read_text("utf-8", "replace")
                found = re.search(r"listening on http://[^/\s]+:(\d+)/", text)
                if found:
                    self.port = int(found.group(1))
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("gateway did not start:\n" + self.log_path.read_text("utf-8", "replace"))

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def pids(self) -> list[int]:
        """The serving processes: runstreams itself, plus its workers with ``--workers``."""
        return process_tree(self.pid)

    def stop(self) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=15)
        self.process = None


# -- one scenario --------------------------------------------------------------------


@dataclass
class Result:
    clients: int
    rate: float
    duration: float
    payload_bytes: int
    partitions: int
    produced: int = 0
    produce_seconds: float = 0.0
    producer_behind: float = 0.0
    deliveries: int = 0
    deliveries_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    lost: int = 0
    duplicates: int = 0
    disconnects: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    producer_cpu: float = 0.0
    broker_cpu: float = 0.0
    other_cpu: float = 0.0
    server_rss: int = 0
    server_rss_end: int = 0
    rss_per_connection: float = 0.0
    server_deliveries: float = 0.0
    slow_cut: float = 0.0
    loadavg_before: str = ""
    loadavg_after: str = ""
    drained: bool = False
    probe_p50_ms: float = 0.0
    probe_p99_ms: float = 0.0
    probe_max_ms: float = 0.0
    probe_cpu: float = 0.0
    connect_seconds: float = 0.0
    workers: int = 1
    reads_per_client_s: float = 0.0


def percentile(hist: list[int], total: int, fraction: float) -> float:
    """The bucket's upper edge, in ms, at which ``fraction`` of the events are in."""
    wanted = max(1, int(total * fraction + 0.999999))
    seen = 0
    for index, count in enumerate(hist):
        seen += count
        if seen >= wanted:
            return (index + 1) * BUCKET_NS / 1e6
    return float("nan")


class Child:
    """A helper process (producer or probe) and our end of its pipe."""

    def __init__(self, target: Any, *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=target, args=(child, *args), daemon=True)
        self.process.start()

    async def receive(self, seconds: float, what: str) -> Any:
        deadline = time.monotonic() + seconds
        while not self.conn.poll():
            if time.monotonic() > deadline or (not self.process.is_alive() and not self.conn.poll()):
                raise RuntimeError(f"{what}: no answer from the helper process")
            await asyncio.sleep(0.02)
        return self.conn.recv()

    def stop(self) -> None:
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


async def scenario_run(
    gateway: Gateway, broker_pid: int, bootstrap: str, topic: str, clients: int, rate: float, args: argparse.Namespace
) -> Result:
    result = Result(clients, rate, args.duration, args.payload_bytes, args.partitions, workers=args.workers)
    count = max(1, round(rate * args.duration))
    result.loadavg_before = loadavg()
    producer = Child(producer_main, bootstrap, topic, args.partitions, rate, count, args.payload_bytes, args.linger_ms)
    probe = Child(probe_main, bootstrap, topic, args.partitions, count) if args.probe else None
    stats = Stats()
    stats.timeline = args.timeline
    stats.seq_per_second = max(1, round(rate))
    stats.per_second = [[0, 0, 0] for _ in range(count // stats.seq_per_second + 1)]
    opened: list[SseClient] = []
    try:
        await producer.receive(60, "producer start")
        if probe is not None:
            await probe.receive(60, "probe start")
        # A first stream starts the topic's hub (with --workers, a few, to reach every worker's hub),
        # then the RSS baseline, then the rest.
        first = 1 if args.workers == 1 else min(clients, 8 * args.workers)
        opened += await clients_open(gateway.port, first, stats, count)
        await asyncio.sleep(1.0)
        rss_base = tree_rss_bytes(gateway.pids())
        connect0 = time.monotonic()
        if clients > first:
            opened += await asyncio.wait_for(
                clients_open(gateway.port, clients - first, stats, count, args.connect_concurrency), timeout=120
            )
        result.connect_seconds = time.monotonic() - connect0
        await asyncio.sleep(2.0)
        serving = gateway.pids()
        result.server_rss = tree_rss_bytes(serving)
        result.rss_per_connection = (result.server_rss - rss_base) / max(1, clients - first)
        print(
            f"  {clients} streams open ({result.connect_seconds:.1f} s); gateway RSS {mib(result.server_rss)}",
            flush=True,
        )

        stats.measuring = True
        stats.reads = 0
        wall0 = time.monotonic()
        cpu0 = (
            tree_cpu_seconds(serving),
            proc_cpu_seconds(broker_pid),
            self_cpu_seconds(),
            system_busy_seconds(),
        )
        go_ns = time.time_ns()
        producer.conn.send("go")
        report = await producer.receive(args.duration * 3 + 60, "producer")
        # Drain: every client has every seq, or the drain time is up.
        pending = [c.done for c in opened if not c.done.done()]
        if pending:
            await asyncio.wait(pending, timeout=args.drain)
        wall = time.monotonic() - wall0
        cpu1 = (
            tree_cpu_seconds(serving),
            proc_cpu_seconds(broker_pid),
            self_cpu_seconds(),
            system_busy_seconds(),
        )
        stats.measuring = False
        if probe is not None:
            if probe.process.is_alive() and not probe.conn.poll():
                probe.conn.send("stop")
            probed = await probe.receive(30, "probe")
            result.probe_p50_ms, result.probe_p99_ms, result.probe_max_ms = probed["p50"], probed["p99"], probed["max"]
            result.probe_cpu = 100 * probed["cpu"] / wall
        result.drained = all(c.done.done() and c.error is None for c in opened)
        result.produced = count
        result.produce_seconds = report["seconds"]
        result.producer_behind = report["max_behind"]
        result.producer_cpu = 100 * report["cpu"] / wall
        result.server_cpu = 100 * (cpu1[0] - cpu0[0]) / wall
        result.broker_cpu = 100 * (cpu1[1] - cpu0[1]) / wall
        result.client_cpu = 100 * (cpu1[2] - cpu0[2]) / wall
        busy = 100 * (cpu1[3] - cpu0[3]) / wall
        ours = result.server_cpu + result.broker_cpu + result.client_cpu + result.producer_cpu + result.probe_cpu
        result.other_cpu = max(0.0, busy - ours)
        result.deliveries = stats.events
        result.reads_per_client_s = stats.reads / max(1, len(opened)) / wall
        span = (stats.last_ns - go_ns) / 1e9 if stats.last_ns else 0.0
        result.deliveries_per_s = stats.events / span if span > 0 else 0.0
        total = sum(stats.hist)
        result.p50_ms = percentile(stats.hist, total, 0.50)
        result.p99_ms = percentile(stats.hist, total, 0.99)
        result.max_ms = stats.max_ns / 1e6
        result.lost = sum(count - c.unique for c in opened) + count * (clients - len(opened))
        result.duplicates = sum(c.duplicates for c in opened)
        result.disconnects = stats.disconnects
        result.server_rss_end = tree_rss_bytes(serving)
        with contextlib.suppress(Exception):
            text = await http_get(gateway.port, "/metrics")
            result.server_deliveries = metric_sum(text, "sluice_deliveries_total")
            result.slow_cut = metric_sum(text, "sluice_slow_clients_cut_total")
        result.loadavg_after = loadavg()
        if args.timeline:
            for second, (events, latency_sum, latency_max) in enumerate(stats.per_second):
                if events:
                    print(
                        f"    second {second:3d}: {events:7d} events, mean {latency_sum / events / 1e6:7.1f} ms, "
                        f"max {latency_max / 1e6:7.1f} ms"
                    )
        if report["failed"]:
            print(f"  WARNING: {report['failed']} produce requests failed", flush=True)
        if report["max_behind"] > 0.1:
            print(f"  WARNING: the producer fell {report['max_behind']:.2f} s behind its schedule", flush=True)
        return result
    finally:
        for client in opened:
            client.close()
        producer.stop()
        if probe is not None:
            probe.stop()


# -- report --------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | clients | rate (msg/s) | deliveries/s | p50 | p99 | max | lost | server CPU | "
        "client CPU | server RSS | RSS / connection |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| one topic, {r.payload_bytes} B values, {r.partitions} partitions, "
            f"{r.workers} gateway process{'es' if r.workers > 1 else ''}, "
            f"{r.duration:g} s | {r.clients} | {r.rate:g} | {r.deliveries_per_s:,.0f} | {r.p50_ms:.1f} ms | "
            f"{r.p99_ms:.1f} ms | {r.max_ms:.1f} ms | {r.lost} | {r.server_cpu:.0f} % | {r.client_cpu:.0f} % | "
            f"{mib(r.server_rss)} | {r.rss_per_connection / 1024:.1f} KiB |"
        )
    return "\n".join(lines)


def details(results: list[Result]) -> str:
    heads = [
        "clients",
        "rate",
        "streams opened in",
        "produced",
        "deliveries",
        "server-side deliveries",
        "duplicates",
        "disconnects (slow cut)",
        "reads / client / s",
        "drained",
        "broker path alone p50 / p99 / max",
        "producer CPU",
        "broker CPU",
        "probe CPU",
        "other processes' CPU",
        "server RSS at end",
        "load avg before -> after",
    ]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---:|" * 9 + "---|---|" + "---:|" * 5 + "---|"]
    for r in results:
        probe = (
            f"{r.probe_p50_ms:.1f} / {r.probe_p99_ms:.1f} / {r.probe_max_ms:.1f} ms" if r.probe_cpu else "(no --probe)"
        )
        cells = [
            str(r.clients),
            f"{r.rate:g}",
            f"{r.connect_seconds:.1f} s",
            str(r.produced),
            f"{r.deliveries:,}",
            f"{r.server_deliveries:,.0f}" if r.workers == 1 else "(one worker's /metrics)",
            str(r.duplicates),
            f"{r.disconnects} ({r.slow_cut:.0f})",
            f"{r.reads_per_client_s:.1f}",
            "yes" if r.drained else "NO",
            probe,
            f"{r.producer_cpu:.0f} %",
            f"{r.broker_cpu:.0f} %",
            f"{r.probe_cpu:.0f} %",
            f"{r.other_cpu:.0f} %",
            mib(r.server_rss_end),
            f"{r.loadavg_before} -> {r.loadavg_after}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_note(results: list[Result]) -> str:
    """Say so when the machine was shared: other processes' CPU skews latency on a small box."""
    others = [r.other_cpu for r in results]
    if max(others) < 15:
        return "The machine was otherwise idle (other processes used under 15 % of one core)."
    return (
        f"Taken while other work shared the machine: other processes used {min(others):.0f}-{max(others):.0f} % "
        "of one core during the measured windows (see the details table)."
    )


def section(results: list[Result], command: str, started: datetime, commit: str) -> str:
    return "\n".join(
        [
            SECTION_BEGIN,
            f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{commit}` on {machine_description()}. " + load_note(results),
            "",
            "```",
            command,
            "```",
            "",
            table(results),
            "",
            "Details (CPU in % of one core; the machine has "
            f'{os.cpu_count()} x 100 %; "other processes" is everything else busy on the machine meanwhile):',
            "",
            details(results),
            SECTION_END,
        ]
    )


def output_write(path: Path, text: str, begin_mark: str = SECTION_BEGIN, end_mark: str = SECTION_END) -> None:
    """Replace the section of ``path`` between the marks (or append one; create the file if needed)."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    begin, end = old.find(begin_mark), old.find(end_mark)
    if begin >= 0 and end > begin:
        new = old[:begin] + text + old[end + len(end_mark) :]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


# -- main ----------------------------------------------------------------------------


def number_list(text: str, kind: type = int) -> list[Any]:
    return [kind(part) for part in text.split(",") if part.strip()]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clients", action="append", default=None, help="Streams per scenario; comma list or repeated (default 100)."
    )
    parser.add_argument(
        "--rate", default="500", help="Messages/s; one value for every scenario or a comma list matching --clients."
    )
    parser.add_argument("--duration", type=float, default=30.0, help="Seconds of producing per scenario.")
    parser.add_argument("--payload-bytes", type=int, default=200, help="Size of each message value.")
    parser.add_argument(
        "--linger-ms",
        type=float,
        default=5.0,
        help="Producer linger.ms (librdkafka's default 5 batches like a real producer).",
    )
    parser.add_argument("--workers", type=int, default=1, help="runstreams --workers (CPU and RSS summed over them).")
    parser.add_argument(
        "--server",
        choices=("daphne", "uvicorn"),
        default="daphne",
        help="daphne: manage.py runstreams; uvicorn: the same ASGI application under uvicorn (uvloop, httptools).",
    )
    parser.add_argument("--partitions", type=int, default=3, help="Partitions of the benchmark topic.")
    parser.add_argument("--drain", type=float, default=15.0, help="Seconds to wait for stragglers after producing.")
    parser.add_argument("--connect-concurrency", type=int, default=50, help="Connections opened at once.")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="Also run a bare Kafka consumer to measure the broker path's own latency "
        "(it adds a second fetcher, so the broker works harder).",
    )
    parser.add_argument("--timeline", action="store_true", help="Print latency per produce-second.")
    parser.add_argument("--output", type=Path, help="Markdown file whose results section is replaced (or appended).")
    args = parser.parse_args()
    args.clients = [n for item in (args.clients or ["100"]) for n in number_list(item)]
    rates = number_list(args.rate, float)
    if len(rates) == 1:
        rates *= len(args.clients)
    if len(rates) != len(args.clients):
        parser.error("--rate takes one value or one per --clients value")
    args.rates = rates
    return args


async def main_async(args: argparse.Namespace) -> list[Result]:
    from streams.server.broker import EmbeddedBroker, topic_ensure

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        broker = EmbeddedBroker().start()
        try:
            assert broker.process is not None
            gateway_db = f"sqlite:///{tmp}/bench.sqlite3"
            for index, (clients, rate) in enumerate(zip(args.clients, args.rates, strict=True)):
                topic = f"bench-fanout-{uuid.uuid4().hex[:8]}"
                topic_ensure(broker.bootstrap, topic, partitions=args.partitions)
                gateway = Gateway(
                    gateway_db, broker.bootstrap, Path(tmp) / f"gateway-{index}.log", args.workers, args.server
                )
                if index == 0:
                    gateway.manage("migrate", "--verbosity", "0")
                gateway.manage(
                    "shell",
                    "-c",
                    f"from streams.services import route_upsert; route_upsert(path={ROUTE_PATH!r}, topic={topic!r})",
                )
                gateway.start()
                print(
                    f"scenario {index + 1}: {clients} clients, {rate:g} msg/s for {args.duration:g} s "
                    f"(gateway pid {gateway.pid}, port {gateway.port}, topic {topic})",
                    flush=True,
                )
                try:
                    result = await asyncio.wait_for(
                        scenario_run(gateway, broker.process.pid, broker.bootstrap, topic, clients, rate, args),
                        timeout=args.duration * 3 + args.drain + 300,
                    )
                finally:
                    gateway.stop()
                results.append(result)
                print(table([result]).splitlines()[-1], flush=True)
                await asyncio.sleep(2.0)
        finally:
            broker.stop()
    return results


def main() -> None:
    import uvloop

    args = arguments()
    limit = fd_limit_raise(max(args.clients) * 2 + 256)
    command = shlex.join(["python", "bench/fanout.py", *sys.argv[1:]])
    started = datetime.now(UTC)
    print(f"{machine_description()}; RLIMIT_NOFILE {limit}; load average {loadavg()}", flush=True)
    results = uvloop.run(main_async(args))
    print()
    print(table(results))
    print()
    print(details(results))
    if args.output:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        output_write(args.output, section(results, command, started, commit or "unknown"))
        print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
