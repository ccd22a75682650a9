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
import os
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

from bench.lib.processes import Child, Gateway, probe_main, producer_main  # noqa: E402
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
from bench.lib.report import git_commit, mib, number_list, output_write  # noqa: E402
from bench.lib.sseload import SseClient, Stats, clients_open, http_get, metric_sum, percentile  # noqa: E402

ROUTE_PATH = "/bench/fanout"


def route_path(index: int) -> str:
    """Every stream of this benchmark opens the same route."""
    return ROUTE_PATH


SECTION_BEGIN = "<!-- bench/fanout.py results: begin -->"
SECTION_END = "<!-- bench/fanout.py results: end -->"


# -- process accounting ------------------------------------------------------------


# -- producer (own process) ----------------------------------------------------------


# -- load client ---------------------------------------------------------------------


# -- gateway -------------------------------------------------------------------------


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
        opened += await clients_open(gateway.port, first, stats, count, path_of=route_path)
        await asyncio.sleep(1.0)
        rss_base = tree_rss_bytes(gateway.pids())
        connect0 = time.monotonic()
        if clients > first:
            opened += await asyncio.wait_for(
                clients_open(
                    gateway.port,
                    clients - first,
                    stats,
                    count,
                    path_of=route_path,
                    concurrency=args.connect_concurrency,
                ),
                timeout=120,
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


# -- main ----------------------------------------------------------------------------


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
        output_write(args.output, section(results, command, started, git_commit()), SECTION_BEGIN, SECTION_END)
        print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
