"""Many concurrent streams on one machine: open N, hold them idle, then broadcast to all of them.

One gateway (``runstreams --workers W``, the embedded broker) and the C load client split over several
processes (``bench/lib/sseload.c``), each connecting from several loopback source addresses (127.0.0.x) so
that neither one process's open-file limit nor one address's ephemeral ports bound the count:

1. **ramp**: N streams of one topic opened at about ``--ramp`` per second (each stream is counted open at
   its first event, the preamble's checkpoint);
2. **idle**: the gateway's RSS (all its processes), the kernel's socket memory (``/proc/net/sockstat``
   ``mem`` pages, and the ``TCP`` and ``sock_inode_cache`` slabs, both ends of every loopback connection)
   and the gateway's CPU over ``--idle-seconds`` with nothing published;
3. **broadcast**: ``--rate`` msg/s for ``--seconds`` to every stream; every stream must get every event;
   p50 / p99 / max from the producer's timestamp to the read.

    python bench/scale.py --streams 20000,50000,100000 --output docs/benchmarks.md
    python bench/scale.py --streams 2000 --workers 1 --idle-seconds 5 --seconds 5   # a smoke run

``--workers 0`` (the default) takes the fewest workers whose open-file limits hold N streams. Each N runs on a
freshly started gateway and broker. The load average before and after is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.cload import CClients, CReport, build  # noqa: E402
from bench.lib.procstats import (  # noqa: E402
    fd_limit_raise,
    loadavg,
    machine_description,
    proc_cpu_seconds,
    system_busy_seconds,
    tree_cpu_seconds,
    tree_rss_bytes,
)
from bench.lib.report import git_commit, mib, number_list, output_write  # noqa: E402
from bench.lib.servers import SluiceServer  # noqa: E402
from bench.lib.sseload import BUCKETS, percentile  # noqa: E402
from streams.server.descriptors import RESERVED_DESCRIPTORS  # noqa: E402

SECTION_BEGIN = "<!-- bench/scale.py results: begin -->"
SECTION_END = "<!-- bench/scale.py results: end -->"
# Streams one load-client process holds (its own open-file limit is the machine's 20,000 here).
PER_CLIENT = 17_000
# Streams opened before the memory baseline, per worker (each worker's hub and first buffers).
WARM_PER_WORKER = 20
PAGE = os.sysconf("SC_PAGESIZE")


@dataclass
class Result:
    streams: int
    workers: int
    clients: int
    opened: int = 0
    failed: int = 0
    open_seconds: float = 0.0
    per_worker: str = ""
    rss_base: int = 0
    rss: int = 0
    sock_mem: int = 0
    slab: int = 0
    idle_cpu: float = 0.0
    machine_idle: float = 0.0
    broker_idle: float = 0.0
    events: int = 0
    want: int = 0
    unique: int = 0
    duplicates: int = 0
    disconnects: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    broadcast_cpu: float = 0.0
    client_cpu: float = 0.0
    machine_broadcast: float = 0.0
    broker_broadcast: float = 0.0

    @property
    def rss_per_stream(self) -> float:
        return (self.rss - self.rss_base) / max(1, self.opened)


def sockstat_mem_bytes() -> int:
    """The kernel's TCP buffer memory (``/proc/net/sockstat``'s ``mem``, in pages), in bytes."""
    with open("/proc/net/sockstat") as handle:
        for line in handle:
            if line.startswith("TCP:"):
                words = line.split()
                return int(words[words.index("mem") + 1]) * PAGE
    return 0


def socket_slab_bytes() -> int:
    """The TCP sockets' and their inodes' slab objects (``/proc/slabinfo``, root only; 0 when unreadable)."""
    total = 0
    try:
        with open("/proc/slabinfo") as handle:
            for line in handle:
                words = line.split()
                if words and words[0] in ("TCP", "sock_inode_cache"):
                    total += int(words[1]) * int(words[3])
    except OSError:
        return 0
    return total


def sockets_per_worker(pids: list[int]) -> str:
    """Open sockets of each process of the gateway, largest first (the kernel's spread over the workers)."""
    counts = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        sockets = 0
        for fd in fds:
            with contextlib.suppress(OSError):
                sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        counts.append(sockets)
    return " / ".join(f"{c:,}" for c in sorted(counts, reverse=True) if c > 10)


async def ramp(groups: list[CClients], shares: list[int], rate: float, first: list[int]) -> None:
    """Open each group's share at about ``rate`` streams/s in all, half-second steps; failures are kept."""
    left = list(shares)
    step = 0.5
    started = time.monotonic()
    ticks = 0
    while any(left):
        chunk = [min(n, max(1, math.ceil(rate * step / len(groups)))) for n in left]
        opening = [
            group.open(n, first=first[i] + shares[i] - left[i], concurrency=200)
            for i, (group, n) in enumerate(zip(groups, chunk, strict=True))
            if n
        ]
        await asyncio.gather(*opening)
        left = [n - c for n, c in zip(left, chunk, strict=True)]
        ticks += 1
        delay = started + ticks * step - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def merged(reports: list[CReport]) -> tuple[list[int], int]:
    hist = [0] * BUCKETS
    max_ns = 0
    for report in reports:
        for index, count in enumerate(report.stats.hist):
            if count:
                hist[index] += count
        max_ns = max(max_ns, report.stats.max_ns)
    return hist, max_ns


async def run(streams: int, args: argparse.Namespace, tmp: Path) -> Result:
    limit = fd_limit_raise(1024)
    workers = args.workers or math.ceil(streams / (0.85 * (limit - RESERVED_DESCRIPTORS)))
    clients = math.ceil(streams / PER_CLIENT)
    result = Result(streams, workers, clients)
    count = max(1, round(args.rate * args.seconds))
    server = SluiceServer(tmp, workers=workers, producer_linger_ms=args.linger_ms)
    server.start()
    if args.heartbeat:
        assert server.gateway is not None
        server.gateway.manage(
            "shell",
            "-c",
            "from streams.services import route_upsert; "
            f"route_upsert(path={server.path(None)!r}, heartbeat_seconds={args.heartbeat})",
        )
        await asyncio.sleep(2.0)  # the workers' route tables are read again after ROUTE_CACHE_SECONDS
    groups: list[CClients] = []
    publisher = None
    try:
        path = server.path(None).replace("%", "%%")
        shares = [streams // clients + (i < streams % clients) for i in range(clients)]
        first = [sum(shares[:i]) for i in range(clients)]
        for _ in range(clients):
            group = CClients(
                server.port,
                path,
                count,
                concurrency=200,
                open_timeout=120,
                sources=args.sources,
                poll_us=args.poll_us,
            )
            groups.append(await group.start())
        publisher = server.publisher(args.rate, count, 200, 0)
        await publisher.receive(60, "publisher start")
        warm = min(streams, WARM_PER_WORKER * workers)
        await groups[0].open(warm)
        await asyncio.sleep(2.0)
        pids = server.pids()
        result.rss_base = tree_rss_bytes(pids)
        sock0, slab0 = sockstat_mem_bytes(), socket_slab_bytes()
        shares[0] -= warm
        first[0] += warm
        started = time.monotonic()
        print(f"  opening {streams:,} streams on {workers} workers from {clients} client processes", flush=True)
        await ramp(groups, shares, args.ramp, first)
        result.open_seconds = time.monotonic() - started
        result.opened = sum(g.opened for g in groups)
        result.failed = sum(len(g.failures) for g in groups)
        print(f"  {result.opened:,} open in {result.open_seconds:.1f} s, {result.failed} failed", flush=True)
        await asyncio.sleep(3.0)
        pids = server.pids()
        result.per_worker = sockets_per_worker(pids)
        result.rss = tree_rss_bytes(pids)
        result.sock_mem = sockstat_mem_bytes() - sock0
        result.slab = socket_slab_bytes() - slab0
        broker = server.broker.process.pid
        cpu0, busy0, wall0 = tree_cpu_seconds(pids), system_busy_seconds(), time.monotonic()
        broker0 = proc_cpu_seconds(broker)
        await asyncio.sleep(args.idle_seconds)
        wall = time.monotonic() - wall0
        result.idle_cpu = 100 * (tree_cpu_seconds(pids) - cpu0) / wall
        result.machine_idle = 100 * (system_busy_seconds() - busy0) / wall
        result.broker_idle = 100 * (proc_cpu_seconds(broker) - broker0) / wall
        print(f"  idle: gateway {result.idle_cpu:.2f} % of a core, RSS {mib(result.rss)}", flush=True)
        for group in groups:
            await group.measure(True)
        cpu0, client0, wall0 = tree_cpu_seconds(pids), sum(proc_cpu_seconds(g.pid) for g in groups), time.monotonic()
        busy0, broker0 = system_busy_seconds(), proc_cpu_seconds(broker)
        publisher.conn.send("go")
        await publisher.receive(args.seconds * 3 + 60, "publisher")
        await asyncio.gather(*(g.wait(args.drain) for g in groups))
        wall = time.monotonic() - wall0
        result.broadcast_cpu = 100 * (tree_cpu_seconds(pids) - cpu0) / wall
        result.client_cpu = 100 * (sum(proc_cpu_seconds(g.pid) for g in groups) - client0) / wall
        result.machine_broadcast = 100 * (system_busy_seconds() - busy0) / wall
        result.broker_broadcast = 100 * (proc_cpu_seconds(broker) - broker0) / wall
        reports = [await g.report() for g in groups]
        hist, max_ns = merged(reports)
        total = sum(hist)
        result.events = total
        result.want = sum(r.want for r in reports)
        result.unique = sum(r.unique for r in reports)
        result.duplicates = sum(r.duplicates for r in reports)
        result.disconnects = sum(r.stats.disconnects for r in reports)
        result.p50_ms = percentile(hist, total, 0.50) if total else 0.0
        result.p99_ms = percentile(hist, total, 0.99) if total else 0.0
        result.max_ms = max_ns / 1e6
        return result
    finally:
        for group in groups:
            await group.close()
        if publisher is not None:
            publisher.stop()
        server.stop()


def line(r: Result) -> str:
    return (
        f"{r.opened:,}/{r.streams:,} streams ({r.workers} workers; sockets {r.per_worker}), opened in "
        f"{r.open_seconds:.1f} s; RSS {mib(r.rss)} ({r.rss_per_stream / 1024:.1f} KiB/stream over the base "
        f"{mib(r.rss_base)}); kernel sockstat {r.sock_mem / max(1, r.opened):.0f} B, slab "
        f"{r.slab / max(1, r.opened) / 1024:.1f} KiB per stream (both ends); idle {r.idle_cpu:.2f} % of a core "
        f"(broker {r.broker_idle:.1f} %); "
        f"broadcast {r.unique:,}/{r.want:,} delivered ({r.duplicates} duplicates, {r.disconnects} cut), "
        f"p50 {r.p50_ms:.0f} p99 {r.p99_ms:.0f} max {r.max_ms:.0f} ms, gateway {r.broadcast_cpu:.0f} %, "
        f"clients {r.client_cpu:.0f} %, broker {r.broker_broadcast:.0f} %, machine {r.machine_broadcast:.0f} %"
    )


def table(results: list[Result]) -> str:
    rows = [
        "| streams | workers | opened in | sockets per worker | gateway RSS | RSS / stream | kernel / stream "
        "(buffers + slabs, both ends) | idle CPU (gateway; broker; machine) | delivered | p50 | p99 | max | CPU "
        "broadcasting (gateway; clients; broker; machine) |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r.opened:,}/{r.streams:,} | {r.workers} | {r.open_seconds:.0f} s | {r.per_worker} | {mib(r.rss)} "
            f"(base {mib(r.rss_base)}) | {r.rss_per_stream / 1024:.1f} KiB ({r.rss / max(1, r.opened) / 1024:.1f} "
            f"all in) | {r.sock_mem / max(1, r.opened):.0f} B + {r.slab / max(1, r.opened) / 1024:.1f} KiB | "
            f"{r.idle_cpu:.2f} % of a core; {r.broker_idle:.1f} %; {r.machine_idle:.0f} % | {r.unique:,}/{r.want:,}"
            f"{f', {r.disconnects} cut' if r.disconnects else ''} | {r.p50_ms:.0f} ms | {r.p99_ms:.0f} ms | "
            f"{r.max_ms:.0f} ms | {r.broadcast_cpu:.0f} %; {r.client_cpu:.0f} %; {r.broker_broadcast:.0f} %; "
            f"{r.machine_broadcast:.0f} % |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="20000", help="Comma list of stream counts, each on a fresh gateway.")
    parser.add_argument("--workers", type=int, default=0, help="Gateway workers (0: as many as the limit needs).")
    parser.add_argument("--sources", type=int, default=8, help="Loopback source addresses per client process.")
    parser.add_argument("--ramp", type=float, default=5000.0, help="Streams opened per second, asked.")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1.0, help="Broadcast messages per second.")
    parser.add_argument("--seconds", type=float, default=30.0, help="Seconds of broadcasting.")
    parser.add_argument("--drain", type=float, default=20.0, help="Seconds to wait for the last deliveries.")
    parser.add_argument(
        "--poll-us",
        type=int,
        default=0,
        help="The load clients sleep this long between waits that found few streams ready (0: they wait in epoll).",
    )
    parser.add_argument("--heartbeat", type=int, default=0, help="The route's heartbeat_seconds (0: the default, 15).")
    parser.add_argument("--linger-ms", type=float, default=1.0, help="The producer's linger.ms.")
    parser.add_argument("--output", type=Path, help="Markdown file whose scale section is replaced (or appended).")
    args = parser.parse_args()
    build()
    command = shlex.join(["python", "bench/scale.py", *sys.argv[1:]])
    started = datetime.now(UTC)
    before = loadavg()
    print(f"{machine_description()}; load average {before}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="sluice-scale-") as tmp_name:
        for n in number_list(args.streams):
            workdir = Path(tmp_name) / str(n)
            workdir.mkdir()
            result = asyncio.run(run(n, args, workdir))
            print("  " + line(result), flush=True)
            results.append(result)
    text = "\n".join(
        [
            SECTION_BEGIN,
            f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{git_commit()}` on {machine_description()}; load average "
            f"before -> after: {before} -> {loadavg()}. CPU is % of ONE core (the machine has {os.cpu_count()} x "
            f"100 %; machine: its busy time, others' work included). Idle over {args.idle_seconds:g} s; "
            f"broadcast {args.rate:g} msg/s for {args.seconds:g} s "
            f"(producer linger.ms {args.linger_ms:g}); keep-alives every {args.heartbeat or 15} s; "
            f"load clients {'polling every ' + str(args.poll_us) + ' µs' if args.poll_us else 'waiting in epoll'}; "
            "RSS / stream is the gateway's growth from "
            f"{WARM_PER_WORKER} streams per worker to all (all in: its whole RSS / streams).",
            "",
            "```",
            command,
            "```",
            "",
            table(results),
            SECTION_END,
        ]
    )
    print()
    print(text)
    if args.output:
        output_write(args.output, text, SECTION_BEGIN, SECTION_END)
        print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
