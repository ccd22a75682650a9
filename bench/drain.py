"""A drain: N streams on one gateway of three behind deploy/nginx.conf, that gateway stopped with SIGTERM.

The N clients open their streams on gateway A, then read on; a producer writes a numbered event every
``1/rate`` s. A gets SIGTERM: ``/readyz`` turns 503, it stops listening, and it ends its streams in waves
over ``SLUICE_DRAIN_SECONDS``, each told a randomized ``retry:``. Each client waits that ``retry:`` (as an
``EventSource`` does) and reconnects through nginx (tests/deploy/nginx.py fills deploy/nginx.conf) with its
Last-Event-ID, landing on B or C. Reported: when the clients got their ``200`` again (a histogram over
the window), the peak admissions per second on B and C together, and every client's events checked: the
numbers from its first to the last produced, each once (0 lost, 0 duplicated).

    python bench/drain.py --clients 5000 --drain 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("SLUICE_DEV", "1")

from bench.lib.processes import Gateway  # noqa: E402
from streams.server.broker import EmbeddedBroker, topic_ensure  # noqa: E402
from tests.deploy.nginx import Nginx  # noqa: E402

TOPIC = "drain"
SETUP = (
    "from streams.services import route_upsert\n"
    "route_upsert(path='/drain/{x}', topic='drain', retry_ms=1000, heartbeat_seconds=5)"
)
BIN_SECONDS = 0.5


class Client:
    """An EventSource: reconnects after the last ``retry:`` with its Last-Event-ID; keeps what it read."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.last_id: str | None = None
        self.retry = 1.0
        self.seqs: list[int] = []
        self.reopened: list[float] = []  # monotonic times of the 200s after the first
        self.opened = asyncio.Event()
        self.stopping = False

    async def run(self, first_port: int, port: int) -> None:
        target = first_port
        while not self.stopping:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
                await self._session(target)
            target = port
            await asyncio.sleep(self.retry)

    async def _session(self, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            head = f"GET /drain/{self.index} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
            if self.last_id is not None:
                head += f"last-event-id: {self.last_id}\r\n"
            writer.write((head + "\r\n").encode())
            if not (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200"):
                return
            if self.opened.is_set():
                self.reopened.append(time.monotonic())
            self.opened.set()
            buffer = b""
            while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
                buffer += (await reader.readexactly(size + 2))[:-2]
                *frames, buffer = buffer.split(b"\n\n")
                for frame in frames:
                    self._frame(frame)
        finally:
            writer.close()

    def _frame(self, frame: bytes) -> None:
        for line in frame.split(b"\n"):
            if line.startswith(b"retry: "):
                self.retry = int(line[7:]) / 1000
            elif line.startswith(b"id: "):
                self.last_id = line[4:].decode()
            elif line.startswith(b"data: "):
                self.seqs.append(int(line[6:]))


def histogram(times: list[float], window: float) -> list[str]:
    bins = [0] * (int(window / BIN_SECONDS) + 4)
    for t in times:
        bins[min(len(bins) - 1, int(t / BIN_SECONDS))] += 1
    top = max(bins) or 1
    return [
        f"{n * BIN_SECONDS:5.1f}-{(n + 1) * BIN_SECONDS:4.1f} s {count:6d} {'#' * round(40 * count / top)}"
        for n, count in enumerate(bins)
    ]


async def scenario(args: argparse.Namespace, a: Gateway, nginx: Nginx, produce: object) -> list[str]:
    assert callable(produce)
    clients = [Client(n) for n in range(args.clients)]
    tasks = []
    for start in range(0, len(clients), 500):  # the first opens are paced: they are not what is measured
        batch = clients[start : start + 500]
        tasks += [asyncio.ensure_future(c.run(a.port, nginx.port)) for c in batch]
        await asyncio.wait_for(asyncio.gather(*(c.opened.wait() for c in batch)), 120)
    producing = asyncio.ensure_future(asyncio.to_thread(produce, args.rate, args.drain + 10))
    await asyncio.sleep(2)
    assert a.process is not None
    term_at = time.monotonic()
    a.process.send_signal(signal.SIGTERM)
    last = await producing
    await asyncio.sleep(3)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(c.seqs and c.seqs[-1] == last for c in clients):  # noqa: ASYNC110
        await asyncio.sleep(0.5)
    for c in clients:
        c.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    back = sorted(t - term_at for c in clients for t in c.reopened)
    lost = sum(len(set(range(c.seqs[0], last + 1)) - set(c.seqs)) for c in clients if c.seqs)
    duplicated = sum(len(c.seqs) - len(set(c.seqs)) for c in clients)
    peak = max((sum(1 for u in back if t <= u < t + 1.0) for t in back), default=0)
    load = os.getloadavg()
    return [
        f"load average before: {args.load[0]:.2f} {args.load[1]:.2f} {args.load[2]:.2f}, after: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores",
        f"{args.clients} streams drained from A (SLUICE_DRAIN_SECONDS={args.drain:g}, retry 1000 ms): "
        f"{len(back)} reconnected through nginx to B and C, {back[0]:.2f}-{back[-1]:.2f} s after SIGTERM"
        if back
        else "no client reconnected",
        f"peak admissions on B and C together: {peak} in one second; "
        f"events checked: {sum(len(c.seqs) for c in clients)}, lost {lost}, duplicated {duplicated}",
        "reconnections (their 200) by time after SIGTERM:",
        *histogram(back, args.drain + 1.0),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--drain", type=float, default=10.0, help="SLUICE_DRAIN_SECONDS of the drained gateway")
    parser.add_argument("--rate", type=float, default=10.0, help="events per second while it drains")
    args = parser.parse_args()
    args.load = os.getloadavg()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * args.clients + 1024)), hard))
    broker = EmbeddedBroker().start()
    workdir = Path(tempfile.mkdtemp(prefix="sluice-drain-"))
    database = f"sqlite:///{workdir / 'db.sqlite3'}"
    gateways = [Gateway(database, broker.bootstrap, workdir / f"gateway-{n}.log") for n in range(3)]
    for gateway in gateways:
        gateway.env.update(SLUICE_DRAIN_SECONDS=str(args.drain), SLUICE_SHUTDOWN_SECONDS=str(args.drain + 5))
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(rate: float, seconds: float) -> int:
        count = int(rate * seconds)
        for n in range(count):
            producer.produce(TOPIC, str(n).encode())
            producer.poll(0)
            time.sleep(1 / rate)
        producer.flush(30)
        return count - 1

    nginx: Nginx | None = None
    try:
        topic_ensure(broker.bootstrap, TOPIC, partitions=1)
        gateways[0].manage("migrate", "--verbosity", "0")
        gateways[0].manage("shell", "-c", SETUP)
        for gateway in gateways:
            gateway.start()
        nginx = Nginx(workdir, [f"127.0.0.1:{gateway.port}" for gateway in gateways]).start()
        lines = asyncio.run(scenario(args, gateways[0], nginx, produce))
    finally:
        if nginx is not None:
            nginx.stop()
        for gateway in gateways:
            gateway.stop()
        broker.stop()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
