"""Ticker benchmark: many clients watching the same fast-changing keys, with and without conflation by key.

A producer updates ``--keys`` keys (drawn at random, each key on one partition) at ``--rate`` updates/s;
``--clients`` streams (the C load client, bench/lib/sseload.c) read one route of the topic. The route is
lossless in one run and ``conflate: {by: key, max_rate: N}`` in the other, each on a fresh gateway. For
each: what the gateway wrote (events and bytes, from its /metrics), its CPU, what the clients received
and how stale it was (produce to receipt), and how many streams were cut for being slow.

    python bench/ticker.py --clients 1000 --keys 1000 --rate 5000 --max-rate 5 --duration 10 \\
        --output docs/benchmarks.md

CPU figures are percent of ONE core (the machine's capacity is nproc x 100 %).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.cload import CClients  # noqa: E402
from bench.lib.processes import Child, Gateway, producer_main  # noqa: E402
from bench.lib.procstats import (  # noqa: E402
    fd_limit_raise,
    loadavg,
    machine_description,
    proc_cpu_seconds,
    system_busy_seconds,
    tree_cpu_seconds,
)
from bench.lib.report import git_commit, output_write  # noqa: E402
from bench.lib.sseload import http_get, metric_sum, percentile  # noqa: E402

ROUTE_PATH = "/bench/ticker"
SECTION_BEGIN = "<!-- bench/ticker.py results: begin -->"
SECTION_END = "<!-- bench/ticker.py results: end -->"


@dataclass
class Result:
    mode: str
    clients: int
    keys: int
    rate: float
    max_rate: int
    seconds: float = 0.0  # the measured window: producing, then the drain
    events: float = 0.0  # written by the gateway (its /metrics)
    bytes: float = 0.0
    conflated: float = 0.0
    cut: float = 0.0
    received: int = 0  # by the clients
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    server_cpu: float = 0.0
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    other_cpu: float = 0.0
    producer_behind: float = 0.0
    loadavg: str = ""

    @property
    def cpu_us_per_update(self) -> float:
        """Gateway CPU per update produced (µs): what one more update of the ticker costs, for all its clients."""
        updates = self.rate * (self.seconds - DRAIN_SECONDS)
        return self.server_cpu / 100 * self.seconds / max(1.0, updates) * 1e6


DRAIN_SECONDS = 3.0


async def run_one(mode: str, broker_pid: int, bootstrap: str, tmp: str, index: int, args: argparse.Namespace) -> Result:
    from streams.server.broker import topic_ensure

    max_rate = args.max_rate if mode == "conflated" else 0
    result = Result(mode, args.clients, args.keys, args.rate, max_rate)
    topic = f"bench-ticker-{uuid.uuid4().hex[:8]}"
    topic_ensure(bootstrap, topic, partitions=args.partitions)
    gateway = Gateway(f"sqlite:///{tmp}/bench.sqlite3", bootstrap, Path(tmp) / f"gateway-{index}.log")
    if index == 0:
        gateway.manage("migrate", "--verbosity", "0")
    conflate = f", conflate='key', conflate_max_rate={max_rate}" if mode == "conflated" else ""
    gateway.manage(
        "shell",
        "-c",
        "from streams.services import route_upsert; "
        f"route_upsert(path={ROUTE_PATH!r}, topic={topic!r}, heartbeat_seconds=15{conflate})",
    )
    gateway.start()
    count = round(args.rate * args.duration)
    producer = Child(
        producer_main, bootstrap, topic, args.partitions, args.rate, count, args.payload_bytes, 5.0, args.keys, "", True
    )
    clients = CClients(gateway.port, ROUTE_PATH, count, ready_on_headers=True, concurrency=100)
    try:
        await producer.receive(60, "producer start")
        await clients.start()
        opened = await clients.open(args.clients)
        print(f"  {mode}: {opened} streams open (gateway pid {gateway.pid}, topic {topic})", flush=True)
        await asyncio.sleep(2.0)
        await clients.measure(True)
        serving = gateway.pids()
        wall0 = time.monotonic()
        cpu0 = (tree_cpu_seconds(serving), proc_cpu_seconds(broker_pid), proc_cpu_seconds(clients.pid))
        busy0 = system_busy_seconds()
        producer.conn.send("go")
        report = await producer.receive(args.duration * 3 + 60, "producer")
        await asyncio.sleep(DRAIN_SECONDS)
        result.seconds = wall = time.monotonic() - wall0
        cpu1 = (tree_cpu_seconds(serving), proc_cpu_seconds(broker_pid), proc_cpu_seconds(clients.pid))
        busy = 100 * (system_busy_seconds() - busy0) / wall
        result.loadavg = loadavg()
        result.server_cpu = 100 * (cpu1[0] - cpu0[0]) / wall
        result.broker_cpu = 100 * (cpu1[1] - cpu0[1]) / wall
        result.client_cpu = 100 * (cpu1[2] - cpu0[2]) / wall
        producer_cpu = 100 * report["cpu"] / wall
        result.other_cpu = max(0.0, busy - result.server_cpu - result.broker_cpu - result.client_cpu - producer_cpu)
        result.producer_behind = report["max_behind"]
        await clients.measure(False)
        received = await clients.report()
        stats = received.stats
        result.received = stats.events
        total = sum(stats.hist)
        result.p50_ms = percentile(stats.hist, total, 0.50)
        result.p99_ms = percentile(stats.hist, total, 0.99)
        text = await http_get(gateway.port, "/metrics")
        result.events = metric_sum(text, "sluice_events_delivered_total")
        result.bytes = metric_sum(text, "sluice_bytes_delivered_total")
        result.conflated = metric_sum(text, "sluice_conflated_records_total")
        result.cut = metric_sum(text, "sluice_slow_clients_cut_total")
        return result
    finally:
        await clients.close()
        producer.stop()
        gateway.stop()


def table(results: list[Result]) -> str:
    lines = [
        "| route | events written/s | bytes written/s | per client | gateway CPU | µs CPU / update | "
        "received by clients | produce to receipt p50 / p99 | streams cut | events conflated away |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        name = f"conflate by key, max_rate {r.max_rate}" if r.mode == "conflated" else "lossless (default)"
        lines.append(
            f"| {name} | {r.events / r.seconds:,.0f} | {r.bytes / r.seconds / 1e6:,.1f} MB | "
            f"{r.bytes / r.seconds / r.clients / 1e3:,.1f} kB | {r.server_cpu:.0f} % | {r.cpu_us_per_update:,.0f} | "
            f"{r.received:,} | {r.p50_ms:,.0f} / {r.p99_ms:,.0f} ms | {r.cut:.0f} | {r.conflated:,.0f} |"
        )
    return "\n".join(lines)


def details(results: list[Result]) -> str:
    lines = [
        "| route | window | broker CPU | load client CPU | other processes' CPU | producer behind | load avg after |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.mode} | {r.seconds:.1f} s | {r.broker_cpu:.0f} % | {r.client_cpu:.0f} % | {r.other_cpu:.0f} % | "
            f"{r.producer_behind:.2f} s | {r.loadavg} |"
        )
    return "\n".join(lines)


def section(results: list[Result], command: str, started: datetime, args: argparse.Namespace) -> str:
    return "\n".join(
        [
            SECTION_BEGIN,
            f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{git_commit()}` on {machine_description()}: "
            f"{args.clients:,} streams of one route, {args.keys:,} keys updated at random at {args.rate:,.0f} "
            f"updates/s for {args.duration:g} s ({args.payload_bytes} B values, {args.partitions} partitions), "
            f"then {DRAIN_SECONDS:g} s to drain; rates are over that window.",
            "",
            "```",
            command,
            "```",
            "",
            table(results),
            "",
            "CPU in % of one core (the gateway is one process here). Details:",
            "",
            details(results),
            SECTION_END,
        ]
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=5000.0, help="Updates/s over all keys.")
    parser.add_argument("--max-rate", type=int, default=5, help="The conflated route's max_rate.")
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds of producing per run.")
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--modes", default="lossless,conflated", help="Comma list of lossless, conflated.")
    parser.add_argument("--output", type=Path, help="Markdown file whose results section is replaced (or appended).")
    return parser.parse_args()


async def main_async(args: argparse.Namespace) -> list[Result]:
    from streams.server.broker import EmbeddedBroker

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        broker = EmbeddedBroker().start()
        try:
            assert broker.process is not None
            for index, mode in enumerate(args.modes.split(",")):
                result = await run_one(mode, broker.process.pid, broker.bootstrap, tmp, index, args)
                results.append(result)
                print(table([result]).splitlines()[-1], flush=True)
                await asyncio.sleep(2.0)
        finally:
            broker.stop()
    return results


def main() -> None:
    import uvloop

    args = arguments()
    limit = fd_limit_raise(args.clients * 2 + 256)
    command = shlex.join(["python", "bench/ticker.py", *sys.argv[1:]])
    started = datetime.now(UTC)
    print(f"{machine_description()}; RLIMIT_NOFILE {limit}; load average {loadavg()}", flush=True)
    results = uvloop.run(main_async(args))
    print()
    print(table(results))
    print()
    print(details(results))
    if args.output:
        output_write(args.output, section(results, command, started, args), SECTION_BEGIN, SECTION_END)
        print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
