"""A reconnect storm: N streams that were reading one topic come back at once with their Last-Event-ID.

A node died: its clients reconnect to this gateway together, each naming the last event it saw. The
benchmark opens N streams (asyncio, raw sockets; ``lib/sseload.c`` sends no Last-Event-ID), reads each to
the same event, drops them all, produces a backlog they missed, then reconnects all N at once. It reports
the admissions per second (``200`` answered: route matched, id parsed, resume planned), the peak second,
and the time until every client is level (has read the last event produced).

    python bench/storm.py --clients 2000 --backlog 20
    python bench/storm.py --clients 20000 --admissions-per-second 4000   # the full-scale target

The load average before the run is printed with the figures: on a loaded machine they are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
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

TOPIC = "storm"
SETUP = "from streams.services import route_upsert\nroute_upsert(path='/storm/{x}', topic='storm', initial='earliest')"


class Client:
    """One stream: opened, read to ``until`` events; the times of its 200 and of its last event."""

    def __init__(self, port: int, index: int) -> None:
        self.port = port
        self.index = index
        self.last_id: str | None = None
        self.admitted_at = 0.0
        self.level_at = 0.0
        self.refused = 0

    async def read(self, until: int, *, started: float) -> None:
        while True:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            try:
                head = f"GET /storm/{self.index} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
                if self.last_id is not None:
                    head += f"last-event-id: {self.last_id}\r\n"
                writer.write((head + "\r\n").encode())
                response = await reader.readuntil(b"\r\n\r\n")
                if not response.startswith(b"HTTP/1.1 200"):
                    self.refused += 1  # 503 admissions_busy: honour retry-after
                    await asyncio.sleep(1.0)
                    continue
                self.admitted_at = time.monotonic() - started
                await self._events(reader, until)
                self.level_at = time.monotonic() - started
                return
            finally:
                writer.close()

    async def _events(self, reader: asyncio.StreamReader, until: int) -> None:
        seen = 0
        buffer = b""
        while seen < until:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            buffer += (await reader.readexactly(size + 2))[:-2]
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                for line in frame.split(b"\n"):
                    if line.startswith(b"id: "):
                        self.last_id = line[4:].decode()
                    elif line.startswith(b"data: "):
                        seen += 1


async def storm(port: int, clients: int, before: int, backlog: int, produce: object) -> dict[str, float]:
    everyone = [Client(port, n) for n in range(clients)]
    gate = asyncio.Semaphore(500)  # the first opens are not the storm: paced

    async def first(client: Client) -> None:
        async with gate:
            await client.read(before, started=time.monotonic())

    await asyncio.gather(*(first(c) for c in everyone))
    assert callable(produce)
    await asyncio.to_thread(produce, before, backlog)
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(c.read(backlog, started=started) for c in everyone)), 600)
    admitted = sorted(c.admitted_at for c in everyone)
    per_second: dict[int, int] = {}
    for t in admitted:
        per_second[int(t)] = per_second.get(int(t), 0) + 1
    return {
        "clients": clients,
        "admitted_in": admitted[-1],
        "admissions_per_second": clients / max(admitted[-1], 1e-3),
        "peak_second": max(per_second.values()),
        "level_in": max(c.level_at for c in everyone),
        "refused": sum(c.refused for c in everyone),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--before", type=int, default=5, help="events every client reads before the node dies")
    parser.add_argument("--backlog", type=int, default=20, help="events produced while the clients are away")
    parser.add_argument("--admissions-per-second", type=float, default=0.0, help="SLUICE_ADMISSIONS_PER_SECOND")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * args.clients + 1024)), hard))
    load = os.getloadavg()
    broker = EmbeddedBroker().start()
    workdir = Path(tempfile.mkdtemp(prefix="sluice-storm-"))
    gateway = Gateway(f"sqlite:///{workdir / 'db.sqlite3'}", broker.bootstrap, workdir / "gateway.log")
    gateway.env["SLUICE_ADMISSIONS_PER_SECOND"] = str(args.admissions_per_second)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(start: int, count: int) -> None:
        for n in range(start, start + count):
            producer.produce(TOPIC, f'{{"seq":{n}}}'.encode())
        producer.flush(30)

    try:
        topic_ensure(broker.bootstrap, TOPIC, partitions=1)
        gateway.manage("migrate", "--verbosity", "0")
        gateway.manage("shell", "-c", SETUP)
        gateway.start()
        produce(0, args.before)
        result = asyncio.run(storm(gateway.port, args.clients, args.before, args.backlog, produce))
    finally:
        gateway.stop()
        broker.stop()
    print(f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    print(
        f"{result['clients']:.0f} streams reconnected with Last-Event-ID at once: all admitted in "
        f"{result['admitted_in']:.2f} s ({result['admissions_per_second']:.0f}/s, peak second "
        f"{result['peak_second']:.0f}), every client level in {result['level_in']:.2f} s, "
        f"{result['refused']:.0f} refused with retry-after"
    )


if __name__ == "__main__":
    main()
