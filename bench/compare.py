"""Sluice against its peers, side by side: the same load client and scenarios against every server.

Starts every server it measures and stops it again, all on 127.0.0.1:

- **sluice**: ``manage.py runstreams`` (daphne) fed by Kafka (the embedded tansu broker) through a
  producer process, as in ``bench/fanout.py``; ``sluice-2w`` is ``runstreams --workers 2``;
  ``sluice-uvicorn`` is the same ASGI application under uvicorn (uvloop, httptools), one process;
  ``sluice-avro`` reads the same payloads written as Avro (Confluent wire format, a loopback schema
  registry) and sends them on as the same JSON: the cost of decoding.
- **sse-starlette**: sse-starlette on uvicorn (``bench/peers/starlette_app.py``), an asyncio.Queue
  per client and an in-process publisher.
- **django-eventstream**: django-eventstream on Django + Channels + daphne
  (``bench/peers/eventstream_app.py``), ``send_event`` called by an in-process publisher.
- **nchan**: Debian's nginx with libnginx-mod-nchan, one worker process; a publisher process POSTs
  each message to Nchan's publisher location (pipelined on one keep-alive connection).

Only Sluice reads Kafka, so only its latency includes a broker. The Python peers run from their
own virtualenv (``bench/.peers-venv``, created on first use with pinned versions); nginx and the
Nchan module come from Debian (``apt-get install nginx-light libnginx-mod-nchan``).

The load client (``--client``): ``c``, the default when gcc is on PATH, is ``bench/lib/sseload.c``
(one epoll thread in a child process, built into ``bench/.build/`` on first use, driven through
``bench/lib/cload.py``); ``python`` is the uvloop client of ``bench/lib/sseload.py`` in this process.
Both send the same request, take ``seq`` and ``ts`` from each event the same way and fill the same
latency histogram, so lost, duplicates, cut and the latencies mean the same with either; client CPU
is the C child's or this process's. The C client costs a fraction of the CPU and adds no parsing
latency of note, which leaves the servers more of a shared machine and keeps the peak search from
measuring the client.

Scenarios:

- ``fanout``: 1,000 clients on one channel at 100 msg/s;
- ``peak``: 100 clients on one channel, the rate doubled from ``--peak-start`` until a step loses
  an event, disconnects a client or has p99 over 1 s; the best passing step is reported;
- ``idle``: 10,000 idle connections, server memory per connection, server CPU over 20 quiet seconds
  (and Sluice's broker connections with 10 and with 10,000 clients);
- ``keyed``: 1,000 clients each with its own key (Sluice: a key filter from a path parameter;
  the peers: a channel per client), messages keyed round-robin;
- ``volume``: the keyed scenario's delivered volume without filters (``keyed-rate / 100`` clients
  on one channel at 100 msg/s), to compare the cost per delivery.

Every scenario, and every step of the peak search, runs on a freshly started server; Sluice's
starts with a new embedded broker of its own, so no run measures the log the runs before it left.

    python bench/compare.py --output docs/benchmarks.md
    python bench/compare.py --servers sluice,sse-starlette --scenarios fanout --duration 5   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.cload import CClients, build, gcc_available  # noqa: E402
from bench.lib.procstats import (  # noqa: E402
    fd_limit_raise,
    loadavg,
    machine_description,
    proc_cpu_seconds,
    self_cpu_seconds,
    system_busy_seconds,
    tree_cpu_seconds,
    tree_rss_bytes,
)
from bench.lib.report import git_commit, mib, output_write  # noqa: E402
from bench.lib.servers import EventstreamServer, NchanServer, Server, SluiceServer, StarletteServer  # noqa: E402
from bench.lib.sseload import SseClient, Stats, clients_open, percentile  # noqa: E402

SECTION_BEGIN = "<!-- bench/compare.py{} results: begin -->"
SECTION_END = "<!-- bench/compare.py{} results: end -->"
SERVERS = ("sluice", "sluice-2w", "sluice-uvicorn", "sluice-avro", "sse-starlette", "django-eventstream", "nchan")
SCENARIOS = ("fanout", "peak", "idle", "keyed", "volume")
CLIENTS = ("c", "python")
CLIENT_NAMES = {
    "c": "the C client (bench/lib/sseload.c, epoll, a child process)",
    "python": "the Python client (bench/lib/sseload.py, uvloop, in the benchmark's process)",
}
# The quiet window over which the idle scenario reads the server's CPU.
IDLE_CPU_SECONDS = 20.0


# -- servers -------------------------------------------------------------------------


# -- one run ---------------------------------------------------------------------------


@dataclass
class Row:
    server: str
    scenario: str
    clients: int
    rate: float = 0.0
    keys: int = 0
    deliveries_per_s: float = 0.0
    expected_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    lost: int = 0
    duplicates: int = 0
    disconnects: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    publisher_cpu: float = 0.0
    other_cpu: float = 0.0
    us_per_delivery: float = 0.0
    server_rss: int = 0
    rss_per_connection: float = 0.0
    opened: int = 0
    broker_connections: str = ""
    behind: float = 0.0
    note: str = ""
    steps: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            self.opened == self.clients
            and self.lost == 0
            and self.disconnects == 0
            and self.p99_ms < 1000
            and self.behind < 0.5
        )


async def server_clients_open(
    server: Server, count: int, stats: Stats, expected: int, keys: int, first: int = 0, concurrency: int = 50
) -> list[SseClient]:
    """Streams of ``server``'s route: with ``keys``, stream n filters on key ``k<n>`` (round-robin records)."""
    return await clients_open(
        server.port,
        count,
        stats,
        expected,
        path_of=lambda index: server.path(f"k{index}" if keys else None),
        want_of=(lambda index: len(range(index, expected, keys))) if keys else None,
        ready_on_headers=server.ready_on_headers,
        first=first,
        concurrency=concurrency,
        tolerate_failures=True,
    )


@dataclass
class Tally:
    """What the streams of one run received, whichever client counted it (sums over the opened streams)."""

    stats: Stats
    unique: int
    duplicates: int
    want: int


class PythonClients:
    """The streams of one run on this process's loop (``bench/lib/sseload.py``); their CPU is this process's."""

    def __init__(self, server: Server, expected: int, keys: int, stats: Stats | None = None) -> None:
        self.server = server
        self.expected = expected
        self.keys = keys
        self.stats = stats if stats is not None else Stats()
        self.streams: list[SseClient] = []

    @property
    def opened(self) -> int:
        return len(self.streams)

    async def start(self) -> None:
        pass

    def cpu_seconds(self) -> float:
        return self_cpu_seconds()

    async def open(self, count: int, first: int = 0, concurrency: int = 50) -> None:
        self.streams += await server_clients_open(
            self.server, count, self.stats, self.expected, self.keys, first, concurrency
        )

    async def measure(self, on: bool) -> None:
        self.stats.measuring = on

    async def wait(self, seconds: float) -> None:
        """Until every stream has all it wants (or lost its connection), at most ``seconds``."""
        pending = [c.done for c in self.streams if not c.done.done()]
        if pending:
            await asyncio.wait(pending, timeout=seconds)

    async def tally(self) -> Tally:
        return Tally(
            self.stats,
            sum(c.unique for c in self.streams),
            sum(c.duplicates for c in self.streams),
            sum(c.want for c in self.streams),
        )

    async def close(self) -> None:
        for client in self.streams:
            client.close()


class CLoadClients:
    """The same streams counted by the C client (``bench/lib/cload.py``) in a child process; its CPU is the child's."""

    def __init__(self, server: Server, expected: int, keys: int) -> None:
        path = server.path("k%d") if keys else server.path(None).replace("%", "%%")
        self.clients = CClients(
            server.port, path, expected, keys=keys, ready_on_headers=server.ready_on_headers, concurrency=50
        )

    @property
    def opened(self) -> int:
        return self.clients.opened

    async def start(self) -> None:
        await self.clients.start()

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.clients.pid)

    async def open(self, count: int, first: int = 0, concurrency: int = 50) -> None:
        await self.clients.open(count, first, concurrency)

    async def measure(self, on: bool) -> None:
        await self.clients.measure(on)

    async def wait(self, seconds: float) -> None:
        await self.clients.wait(seconds)

    async def tally(self) -> Tally:
        report = await self.clients.report()
        return Tally(report.stats, report.unique, report.duplicates, report.want)

    async def close(self) -> None:
        await self.clients.close()


def load_clients(client: str, server: Server, expected: int, keys: int, stats: Stats) -> PythonClients | CLoadClients:
    """``client``'s streams for one run: every stream wants seqs ``0 .. expected-1`` (with ``keys``, its own)."""
    if client == "c":
        return CLoadClients(server, expected, keys)
    return PythonClients(server, expected, keys, stats)


async def run_load(
    server: Server,
    scenario: str,
    clients: int,
    rate: float,
    duration: float,
    keys: int,
    drain: float,
    client: str = "python",
) -> Row:
    """Open ``clients`` streams, publish ``rate`` msg/s for ``duration`` s, wait for stragglers, measure."""
    row = Row(server.name, scenario, clients, rate, keys)
    count = max(1, round(rate * duration))
    stats = Stats()
    stats.seq_per_second = max(1, round(rate))
    stats.per_second = [[0, 0, 0] for _ in range(count // stats.seq_per_second + 1)]
    publisher = server.publisher(rate, count, 200, keys)
    streams = load_clients(client, server, count, keys, stats)
    try:
        await streams.start()
        await publisher.receive(60, "publisher start")
        await streams.open(1)
        await asyncio.sleep(0.5)
        rss_base = tree_rss_bytes(server.pids())
        await asyncio.wait_for(streams.open(clients - 1, first=1), 300)
        row.opened = streams.opened
        await asyncio.sleep(2.0)
        pids = server.pids()
        row.server_rss = tree_rss_bytes(pids)
        row.rss_per_connection = (row.server_rss - rss_base) / max(1, row.opened - 1)
        await streams.measure(True)
        wall0 = time.monotonic()
        cpu0 = (tree_cpu_seconds(pids), streams.cpu_seconds(), system_busy_seconds())
        go_ns = time.time_ns()
        publisher.conn.send("go")
        report = await publisher.receive(duration * 3 + 60, "publisher")
        await streams.wait(drain)
        wall = time.monotonic() - wall0
        cpu1 = (tree_cpu_seconds(pids), streams.cpu_seconds(), system_busy_seconds())
        await streams.measure(False)
        tally = await streams.tally()
        stats = tally.stats
        row.behind = report["max_behind"]
        row.server_cpu = 100 * (cpu1[0] - cpu0[0]) / wall
        row.client_cpu = 100 * (cpu1[1] - cpu0[1]) / wall
        row.publisher_cpu = 100 * report["cpu"] / wall
        busy = 100 * (cpu1[2] - cpu0[2]) / wall
        row.other_cpu = max(0.0, busy - row.server_cpu - row.client_cpu - row.publisher_cpu)
        span = (stats.last_ns - go_ns) / 1e9 if stats.last_ns else 0.0
        row.deliveries_per_s = stats.events / span if span > 0 else 0.0
        wanted = tally.want + (clients - row.opened) * (count // max(1, keys or 1))
        row.expected_per_s = wanted / max(duration, 1e-9)
        row.us_per_delivery = (cpu1[0] - cpu0[0]) / stats.events * 1e6 if stats.events else 0.0
        total = sum(stats.hist)
        row.p50_ms = percentile(stats.hist, total, 0.50) if total else 0.0
        row.p99_ms = percentile(stats.hist, total, 0.99) if total else 0.0
        row.max_ms = stats.max_ns / 1e6
        row.lost = max(0, wanted - tally.unique)
        row.duplicates = tally.duplicates
        row.disconnects = stats.disconnects
        return row
    finally:
        await streams.close()
        publisher.stop()


async def run_idle(server: Server, clients: int, client: str = "python") -> Row:
    """``clients`` idle streams: server memory per connection (and Sluice's broker connections)."""
    row = Row(server.name, "idle", clients)
    streams = load_clients(client, server, 1, 0, Stats())
    try:
        await streams.start()
        await streams.open(10)
        await asyncio.sleep(1.0)
        rss_base = tree_rss_bytes(server.pids())
        with_ten = server.broker_connections()
        started = time.monotonic()
        await asyncio.wait_for(streams.open(clients - 10, first=10, concurrency=100), 600)
        row.opened = streams.opened
        await asyncio.sleep(3.0)
        row.server_rss = tree_rss_bytes(server.pids())
        row.rss_per_connection = (row.server_rss - rss_base) / max(1, row.opened - 10)
        # What the held streams cost while nothing happens: server CPU over a quiet window.
        cpu_before, quiet_started = tree_cpu_seconds(server.pids()), time.monotonic()
        await asyncio.sleep(IDLE_CPU_SECONDS)
        row.server_cpu = (tree_cpu_seconds(server.pids()) - cpu_before) / (time.monotonic() - quiet_started) * 100
        with_all = server.broker_connections()
        if with_ten is not None:
            row.broker_connections = f"{with_ten} -> {with_all}"
        row.note = f"opened in {time.monotonic() - started:.0f} s"
        return row
    finally:
        await streams.close()


async def run_server(server: Server, args: argparse.Namespace) -> list[Row]:
    """Every scenario of one server, each on a freshly started server (Sluice's with a new broker)."""
    rows: list[Row] = []
    print(f"== {server.name}", flush=True)
    for scenario in args.scenarios:
        if scenario == "idle" and server.name == "sluice-2w":  # the same memory per stream as one worker
            continue
        if scenario == "peak":
            row = await peak_search(server, args)
        else:
            with started(server):
                row = await run_scenario(server, scenario, args)
        print("  " + row_line(row), flush=True)
        rows.append(row)
        await asyncio.sleep(1.0)
    return rows


@contextlib.contextmanager
def started(server: Server) -> Iterator[Server]:
    """The server started for one run and stopped after it: no run inherits another's state.

    Sluice's embedded broker is started with it, so each run begins on an empty log: that broker's
    cost per fetch grows with its log (a fetch near the end of millions of records takes
    hundreds of ms; Kafka's does not), which would otherwise measure the scenarios before.
    """
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def run_scenario(server: Server, scenario: str, args: argparse.Namespace) -> Row:
    if scenario == "fanout":
        return await run_load(server, "fanout", args.fanout_clients, 100.0, args.duration, 0, args.drain, args.client)
    if scenario == "keyed":
        keys = args.keyed_clients
        return await run_load(server, "keyed", keys, args.keyed_rate, args.duration, keys, args.drain, args.client)
    if scenario == "volume":
        clients = max(1, round(args.keyed_rate / 100))
        return await run_load(server, "volume", clients, 100.0, args.duration, 0, args.drain, args.client)
    return await run_idle(server, args.idle_clients, args.client)


async def peak_search(server: Server, args: argparse.Namespace) -> Row:
    """Double the rate until a step fails; the best passing step, with every step listed.

    Each step runs on a freshly started server, as each scenario does.
    """
    best: Row | None = None
    steps: list[str] = []

    async def step(rate: float) -> Row:
        with started(server):
            row = await run_load(
                server, "peak", args.peak_clients, rate, args.peak_duration, 0, args.drain, args.client
            )
        verdict = "ok" if row.passed else "fail"
        steps.append(f"{rate:g}: {row.deliveries_per_s:,.0f}/s p99 {row.p99_ms:.0f} ms lost {row.lost:,} {verdict}")
        print(f"    peak step {steps[-1]} (server {row.server_cpu:.0f} %)", flush=True)
        await asyncio.sleep(1.0)
        return row

    # The Python peers start lower: at 125 msg/s to 100 clients neither passed a step on a shared 2-core box.
    rate = args.peak_start if server.name.startswith(("sluice", "nchan")) else args.peak_start / 32
    failed: Row | None = None
    while rate <= args.peak_max:
        row = await step(rate)
        if not row.passed:
            failed = row
            break
        best = row
        rate *= 2
    if best is not None and failed is not None:
        between = await step(best.rate * 1.5)  # one step between the last pass and the first failure
        if between.passed:
            best = between
    best = best or failed
    assert best is not None
    best.steps = steps
    return best


# -- report ----------------------------------------------------------------------------


def row_line(r: Row) -> str:
    if r.scenario == "idle":
        return (
            f"{r.server} idle {r.opened}/{r.clients}: RSS {mib(r.server_rss)}, "
            f"{r.rss_per_connection / 1024:.1f} KiB/conn, broker {r.broker_connections or 'n/a'} ({r.note})"
        )
    return (
        f"{r.server} {r.scenario} {r.opened}/{r.clients} x {r.rate:g}: {r.deliveries_per_s:,.0f}/s "
        f"p50 {r.p50_ms:.1f} p99 {r.p99_ms:.1f} max {r.max_ms:.1f} ms lost {r.lost} cut {r.disconnects} "
        f"server {r.server_cpu:.0f} % ({r.us_per_delivery:.2f} us/delivery) client {r.client_cpu:.0f} % "
        f"other {r.other_cpu:.0f} %"
    )


def load_table(rows: list[Row], scenario: str) -> str:
    lines = [
        "| server | clients | rate (msg/s) | deliveries/s | p50 | p99 | max | lost | cut | server CPU | "
        "µs / delivery | client CPU | publisher CPU | other CPU | server RSS | RSS / connection |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.scenario != scenario:
            continue
        lines.append(
            f"| {r.server} | {r.opened}/{r.clients} | {r.rate:g} | {r.deliveries_per_s:,.0f} | {r.p50_ms:.1f} ms | "
            f"{r.p99_ms:.1f} ms | {r.max_ms:.1f} ms | {r.lost:,} | {r.disconnects} | {r.server_cpu:.0f} % | "
            f"{r.us_per_delivery:.2f} | {r.client_cpu:.0f} % | {r.publisher_cpu:.0f} % | {r.other_cpu:.0f} % | "
            f"{mib(r.server_rss)} | {per_connection(r)} |"
        )
    return "\n".join(lines)


def per_connection(r: Row) -> str:
    """RSS per connection; n/a when the process gave memory back while the streams opened (after idle)."""
    return f"{r.rss_per_connection / 1024:.1f} KiB" if r.rss_per_connection >= 0 else "n/a"


def idle_table(rows: list[Row]) -> str:
    lines = [
        "| server | connections held | server RSS | RSS / connection | server CPU while idle "
        "| broker connections (10 -> all) | note |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        if r.scenario == "idle":
            lines.append(
                f"| {r.server} | {r.opened:,}/{r.clients:,} | {mib(r.server_rss)} | "
                f"{per_connection(r)} | {r.server_cpu:.2f} % | {r.broker_connections or 'n/a'} | {r.note} |"
            )
    return "\n".join(lines)


def section(rows: list[Row], args: argparse.Namespace, command: str, started: datetime, commit: str, load: str) -> str:
    parts = [
        SECTION_BEGIN.format(args.section),
        f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{commit}` on {machine_description()}; "
        f"load average before -> after: {load}. CPU is % of ONE core (the machine has {os.cpu_count()} x 100 %); "
        "µs / delivery = server CPU time / events received by the clients; other CPU = the machine's busy "
        "time minus server, client and publisher (others' work, and for Sluice the broker and producer). "
        f"Load client: {CLIENT_NAMES[args.client]} (`--client {args.client}`).",
        "",
        "```",
        command,
        "```",
    ]
    titles = {
        "fanout": f"### {args.fanout_clients:,} clients, one channel, 100 msg/s, {args.duration:g} s",
        "peak": f"### {args.peak_clients} clients, highest rate with nothing lost and p99 under 1 s "
        f"({args.peak_duration:g} s steps, rate doubled from {args.peak_start:g})",
        "keyed": f"### {args.keyed_clients:,} clients, each its own key, {args.keyed_rate:g} msg/s keyed round-robin, "
        f"{args.duration:g} s",
        "volume": f"### The same delivered volume without filters: {max(1, round(args.keyed_rate / 100))} clients "
        f"on one channel at 100 msg/s, {args.duration:g} s",
    }
    for scenario in args.scenarios:
        if scenario == "idle":
            parts += ["", f"### {args.idle_clients:,} idle connections", "", idle_table(rows)]
            continue
        parts += ["", titles[scenario], "", load_table(rows, scenario)]
        if scenario == "peak":
            parts += [""] + [f"- {r.server}: " + "; ".join(r.steps) for r in rows if r.scenario == "peak"]
    parts.append(SECTION_END.format(args.section))
    return "\n".join(parts)


# -- main --------------------------------------------------------------------------------


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"Comma list of {', '.join(SERVERS)}.")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"Comma list of {', '.join(SCENARIOS)}.")
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds of publishing (fanout, keyed).")
    parser.add_argument("--drain", type=float, default=10.0, help="Seconds to wait for stragglers.")
    parser.add_argument("--fanout-clients", type=int, default=1000)
    parser.add_argument("--peak-clients", type=int, default=100)
    parser.add_argument(
        "--peak-start",
        type=float,
        default=1000.0,
        help="First rate of the peak search for Sluice and Nchan (msg/s); the Python peers start at 1/32 of it.",
    )
    parser.add_argument("--peak-max", type=float, default=64000.0)
    parser.add_argument("--peak-duration", type=float, default=5.0)
    parser.add_argument("--idle-clients", type=int, default=10000)
    parser.add_argument("--keyed-clients", type=int, default=1000)
    parser.add_argument("--keyed-rate", type=float, default=5000.0)
    parser.add_argument("--output", type=Path, help="Markdown file whose compare section is replaced (or appended).")
    parser.add_argument(
        "--section", default="", help="Name the output section (runs of different scenarios kept side by side)."
    )
    parser.add_argument(
        "--producer-linger-ms",
        type=float,
        help="linger.ms of the producer feeding Sluice's broker (default: 0 up to 1,000 msg/s, 5 above).",
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="c" if gcc_available() else "python",
        help="The load client: c (bench/lib/sseload.c, the default when gcc is on PATH) or python "
        "(bench/lib/sseload.py). Both count alike; c costs a fraction of the CPU.",
    )
    parser.add_argument("--json", type=Path, help="Also write every row as JSON (tests/bench/test_regression.py).")
    args = parser.parse_args(argv)
    args.section = f" {args.section}" if args.section else ""
    args.servers = [s for s in args.servers.split(",") if s]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for name in args.servers:
        if name not in SERVERS:
            parser.error(f"unknown server {name}")
    for name in args.scenarios:
        if name not in SCENARIOS:
            parser.error(f"unknown scenario {name}")
    return args


async def main_async(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sluice-compare-") as tmp_name:
        tmp = Path(tmp_name)
        linger = args.producer_linger_ms
        for name in args.servers:
            workdir = tmp / name
            workdir.mkdir()
            server: Server
            if name == "sluice":
                server = SluiceServer(workdir, producer_linger_ms=linger)
            elif name == "sluice-2w":
                server = SluiceServer(workdir, workers=2, producer_linger_ms=linger)
            elif name == "sluice-uvicorn":
                server = SluiceServer(workdir, asgi_server="uvicorn", producer_linger_ms=linger)
            elif name == "sluice-avro":
                server = SluiceServer(workdir, value_format="avro", producer_linger_ms=linger)
            elif name == "sse-starlette":
                server = StarletteServer(workdir)
            elif name == "django-eventstream":
                server = EventstreamServer(workdir)
            else:
                server = NchanServer(workdir)
            try:
                rows += await run_server(server, args)
            except Exception as exc:  # one server failing to start must not lose the others' rows
                print(f"  {name} failed: {exc!r}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    import uvloop

    args = arguments(argv)
    wanted = max(args.idle_clients, args.fanout_clients, args.keyed_clients) + 1024
    with contextlib.suppress(ValueError, OSError):  # root may raise the hard limit too (servers inherit it)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 2 * wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, 2 * wanted))
    fd_limit_raise(wanted)
    if args.client == "c":
        try:
            build()  # before any server starts: a missing gcc or a build error is said at once
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from exc
    command = shlex.join(["python", "bench/compare.py", *(sys.argv[1:] if argv is None else argv)])
    started = datetime.now(UTC)
    before = loadavg()
    print(f"{machine_description()}; load average {before}", flush=True)
    rows = uvloop.run(main_async(args))
    load = f"{before} -> {loadavg()}"
    text = section(rows, args, command, started, git_commit(), load)
    print()
    print(text)
    if args.output:
        output_write(args.output, text, SECTION_BEGIN.format(args.section), SECTION_END.format(args.section))
        print(f"\nwrote {args.output}")
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=1))
    return rows


if __name__ == "__main__":
    main()
