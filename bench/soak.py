"""Soak: churn streams for a long while and show that the gateway gives back what it took.

Starts the embedded broker, a gateway (``manage.py runstreams``) on a temporary
SQLite database, a producer thread and ``--open`` SSE clients. Then, every
second, ``--churn`` clients leave and as many arrive: a third fresh, a third
resuming from an id a departed client held a moment ago (inside the topic's
cache), a third from one held long ago (outside it, read from Kafka). Open
file descriptors, Kafka consumers, asyncio tasks, threads and RSS of the
gateway are sampled from its ``/metrics`` before, during and after; after the
churn every client leaves and the figures must come back within the bounds
below (the topic's consumer, idle, is released after ``SLUICE_HUB_IDLE_SECONDS``).

    python bench/soak.py --minutes 10 --open 1000 --churn 50
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import re
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.processes import Gateway  # noqa: E402
from bench.lib.procstats import fd_limit_raise, loadavg, machine_description  # noqa: E402

ROUTE_PATH = "/soak/stream"
CACHE_MAX_MESSAGES = 300
# After the churn, once every client has left and the hub idled out, compared with before the first client:
FD_BOUND = 16  # descriptors (a few sockets in TIME_WAIT handling, the metrics request itself)
TASK_BOUND = 8  # asyncio tasks
# RSS while churning, over RSS with every stream open: catch-ups from Kafka (a librdkafka consumer each, with
# its fetch buffers, on pool threads with their own malloc arenas) raise it to a plateau.
RSS_BOUND = 160 * 1024 * 1024
RSS_AFTER_BOUND = 16 * 1024 * 1024  # after the churn stops: nothing more may be taken
ID_FIND = re.compile(rb"\nid: ([^\n]+)\n").findall


@dataclass
class Sample:
    at: float
    phase: str
    clients: int
    values: dict[str, float]


@dataclass
class Soak:
    port: int
    opened: int = 0
    closed: int = 0
    refused: int = 0
    events: int = 0
    resumes_recent: int = 0
    resumes_old: int = 0
    samples: list[Sample] = field(default_factory=list)
    # Ids departed clients held: (when they left, id).
    departed: collections.deque[tuple[float, str]] = field(default_factory=lambda: collections.deque(maxlen=5000))


class SoakClient(asyncio.Protocol):
    """A stream held open; remembers its last id and counts events (bytes are not parsed further)."""

    def __init__(self, soak: Soak, last_id: str | None) -> None:
        self.soak = soak
        self.last_id = last_id
        self.transport: asyncio.Transport | None = None
        self.tail = b""
        self.ok = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        head = f"GET {ROUTE_PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
        if self.last_id:
            head += f"last-event-id: {self.last_id}\r\n"
        transport.write((head + "\r\n").encode())

    def data_received(self, data: bytes) -> None:
        if not self.ok:
            self.ok = data.startswith(b"HTTP/1.1 200")
            if not self.ok:
                self.soak.refused += 1
        # Whole frames only; the unfinished one waits for the next read.
        text = self.tail + data
        cut = text.rfind(b"\n\n")
        if cut < 0:
            self.tail = text[-65536:]
            return
        ids = ID_FIND(b"\n" + text[: cut + 2])
        if ids:
            self.last_id = ids[-1].decode()
            self.soak.events += len(ids)
        self.tail = text[cut + 2 :]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def leave(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.last_id:
            self.soak.departed.append((time.monotonic(), self.last_id))
        self.soak.closed += 1


def producer_run(bootstrap: str, topic: str, rate: float, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    seq = 0
    next_at = time.monotonic()
    while not stop.is_set():
        producer.produce(topic, f'{{"seq":{seq},"ts":{time.time_ns()}}}'.encode(), partition=seq % 3)
        producer.poll(0)
        seq += 1
        next_at += 1 / rate
        stop.wait(max(0.0, next_at - time.monotonic()))
    producer.flush(10)


async def metrics(port: int) -> dict[str, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
    body = await reader.read()
    writer.close()
    out: dict[str, float] = {}
    for line in body.decode().split("\r\n\r\n", 1)[1].splitlines():
        if line.startswith("sluice_") and " " in line:
            name, value = line.rsplit(" ", 1)
            with contextlib.suppress(ValueError):
                out[name.split("{")[0]] = out.get(name.split("{")[0], 0.0) + float(value)
    return out


async def sample(soak: Soak, phase: str, clients: int) -> Sample:
    taken = Sample(time.monotonic(), phase, clients, await metrics(soak.port))
    soak.samples.append(taken)
    v = taken.values
    print(
        f"  {phase:<8} open {clients:>5}  fds {v.get('sluice_open_fds', 0):>6.0f}  consumers "
        f"{v.get('sluice_kafka_consumers', 0):>2.0f}  tasks {v.get('sluice_asyncio_tasks', 0):>6.0f}  threads "
        f"{v.get('sluice_threads', 0):>3.0f}  rss {v.get('sluice_rss_bytes', 0) / 2**20:>7.1f} MiB  "
        f"subscribers {v.get('sluice_subscribers', 0):>5.0f}  events {soak.events}",
        flush=True,
    )
    return taken


async def client_open(soak: Soak, last_id: str | None) -> SoakClient | None:
    loop = asyncio.get_running_loop()
    try:
        _, client = await loop.create_connection(lambda: SoakClient(soak, last_id), "127.0.0.1", soak.port)
    except OSError:
        soak.refused += 1
        return None
    soak.opened += 1
    return client


def resume_id(soak: Soak, rng: random.Random, kind: int) -> str | None:
    """Fresh (None), a recent id (inside the cache) or an old one (outside it)."""
    now = time.monotonic()
    if kind == 1:
        recent = [i for at, i in list(soak.departed)[-200:] if now - at < 2]
        if recent:
            soak.resumes_recent += 1
            return rng.choice(recent)
    if kind == 2:
        old = [i for at, i in list(soak.departed)[:500] if now - at > 60]
        if old:
            soak.resumes_old += 1
            return rng.choice(old)
    return None


async def soak_run(args: argparse.Namespace, port: int) -> Soak:
    soak = Soak(port)
    rng = random.Random(args.seed)
    await asyncio.sleep(2)
    await sample(soak, "idle", 0)
    clients: list[SoakClient] = []
    for start in range(0, args.open, 100):
        opened = await asyncio.gather(*(client_open(soak, None) for _ in range(min(100, args.open - start))))
        clients += [c for c in opened if c is not None]
    await asyncio.sleep(5)
    await sample(soak, "open", len(clients))
    churn_end = time.monotonic() + args.minutes * 60
    next_sample = time.monotonic() + args.sample_seconds
    while time.monotonic() < churn_end:
        tick = time.monotonic()
        rng.shuffle(clients)
        leaving, clients = clients[: args.churn], clients[args.churn :]
        for client in leaving:
            client.leave()
        arriving = await asyncio.gather(*(client_open(soak, resume_id(soak, rng, n % 3)) for n in range(args.churn)))
        clients += [c for c in arriving if c is not None]
        if time.monotonic() >= next_sample:
            await sample(soak, "churn", len(clients))
            next_sample += args.sample_seconds
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    await asyncio.sleep(5)
    await sample(soak, "churned", len(clients))
    for client in clients:
        client.leave()
    clients = []
    # Every stream gone; then the hub idles out and releases the topic's consumer.
    await asyncio.sleep(args.idle_seconds + 15)
    await sample(soak, "after", 0)
    return soak


def report(soak: Soak, args: argparse.Namespace) -> tuple[str, bool]:
    by_phase = {s.phase: s for s in soak.samples}
    idle, opened, churned, after = by_phase["idle"], by_phase["open"], by_phase["churned"], by_phase["after"]
    churn = [s for s in soak.samples if s.phase == "churn"]

    def v(s: Sample, key: str) -> float:
        return s.values.get(key, 0.0)

    def peak(key: str) -> float:
        return max(v(s, key) for s in churn) if churn else v(churned, key)

    rows = [
        ("open file descriptors", "sluice_open_fds", 1.0, ""),
        ("Kafka consumers", "sluice_kafka_consumers", 1.0, ""),
        ("asyncio tasks", "sluice_asyncio_tasks", 1.0, ""),
        ("threads", "sluice_threads", 1.0, ""),
        ("RSS (MiB)", "sluice_rss_bytes", 2**20, ""),
    ]
    lines = [
        f"| figure | before (idle) | {args.open} open | churn peak | end of churn | after (all left, idle) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, key, unit, _ in rows:
        lines.append(
            f"| {label} | {v(idle, key) / unit:.0f} | {v(opened, key) / unit:.0f} | {peak(key) / unit:.0f} "
            f"| {v(churned, key) / unit:.0f} | {v(after, key) / unit:.0f} |"
        )
    # The bounds hold once the churn stops: what the churn took must come back, and nothing may keep growing.
    checks = {
        f"fds after <= before + {FD_BOUND}": v(after, "sluice_open_fds") <= v(idle, "sluice_open_fds") + FD_BOUND,
        "Kafka consumers after == 0": v(after, "sluice_kafka_consumers") == 0,
        f"tasks after <= before + {TASK_BOUND}": v(after, "sluice_asyncio_tasks")
        <= v(idle, "sluice_asyncio_tasks") + TASK_BOUND,
        # Thread pools keep their idle threads, up to their fixed sizes.
        "threads after <= churn peak": v(after, "sluice_threads") <= peak("sluice_threads"),
        f"RSS after <= RSS at the end of the churn + {RSS_AFTER_BOUND // 2**20} MiB": v(after, "sluice_rss_bytes")
        <= v(churned, "sluice_rss_bytes") + RSS_AFTER_BOUND,
        f"RSS during the churn <= RSS with {args.open} open + {RSS_BOUND // 2**20} MiB": peak("sluice_rss_bytes")
        <= v(opened, "sluice_rss_bytes") + RSS_BOUND,
    }
    half = churn[len(churn) // 2 :] or [churned]
    slope = (v(half[-1], "sluice_rss_bytes") - v(half[0], "sluice_rss_bytes")) / max(1.0, half[-1].at - half[0].at)
    lines.append("")
    lines.append(
        f"{args.minutes:g} min of churn, {args.churn} clients leaving and {args.churn} arriving a second "
        f"({soak.opened} streams opened, {soak.closed} closed, {soak.refused} refused), {soak.events} events "
        f"received; resumes inside the cache {soak.resumes_recent}, outside it {soak.resumes_old}; "
        f"catch-ups from the cache {v(churned, 'sluice_catch_ups_cache_total'):.0f}, from Kafka "
        f"{v(churned, 'sluice_catch_ups_kafka_total'):.0f}; RSS slope over the second half of the churn "
        f"{slope * 60 / 2**20:+.2f} MiB/min; load average at the end {loadavg()}."
    )
    lines.append("")
    lines += [f"- {'ok' if ok else 'FAILED'}: {name}" for name, ok in checks.items()]
    return "\n".join(lines), all(checks.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--open", type=int, default=1000, help="Streams open at a time.")
    parser.add_argument("--churn", type=int, default=50, help="Clients leaving (and arriving) each second.")
    parser.add_argument("--rate", type=float, default=20.0, help="Messages produced a second.")
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="SLUICE_HUB_IDLE_SECONDS for the gateway.")
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    fd_limit_raise(args.open * 2 + 512)
    print(f"{machine_description()}; load average {loadavg()}", flush=True)
    from streams.server.broker import EmbeddedBroker, topic_ensure

    with tempfile.TemporaryDirectory(prefix="sluice-soak-") as tmp:
        broker = EmbeddedBroker().start()
        stop = threading.Event()
        gateway = Gateway(f"sqlite:///{tmp}/soak.sqlite3", broker.bootstrap, Path(tmp) / "gateway.log")
        gateway.env["SLUICE_HUB_IDLE_SECONDS"] = str(args.idle_seconds)
        try:
            topic = f"soak-{uuid.uuid4().hex[:8]}"
            topic_ensure(broker.bootstrap, topic, partitions=3)
            gateway.manage("migrate", "--verbosity", "0")
            gateway.manage(
                "shell",
                "-c",
                "from streams.services import route_upsert, topic_upsert; "
                f"topic_upsert(name={topic!r}, cache_max_messages={CACHE_MAX_MESSAGES}); "
                f"route_upsert(path={ROUTE_PATH!r}, topic={topic!r}, heartbeat_seconds=5)",
            )
            gateway.start()
            threading.Thread(target=producer_run, args=(broker.bootstrap, topic, args.rate, stop), daemon=True).start()
            soak = asyncio.run(soak_run(args, gateway.port))
        finally:
            stop.set()
            gateway.stop()
            broker.stop()
            log = (
                (Path(tmp) / "gateway.log").read_text("utf-8", "replace")
                if (Path(tmp) / "gateway.log").exists()
                else ""
            )
    tracebacks = log.count("Traceback")
    text, ok = report(soak, args)
    print()
    print(text)
    print(f"- {'ok' if tracebacks == 0 else 'FAILED'}: tracebacks in the gateway log: {tracebacks}")
    sys.exit(0 if ok and tracebacks == 0 else 1)


if __name__ == "__main__":
    main()
