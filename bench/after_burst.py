"""One long-lived gateway and embedded broker through every step, as a production server lives.

``bench/compare.py`` starts a fresh server (and broker) for every scenario and every step, so
no figure there depends on what came before. This script keeps one Sluice gateway and one
embedded broker for the whole run, with the producer lingering 1 ms (``linger.ms=1``, as
producers do), and measures what history does to it:

- **after a burst**: 100 clients x 50 msg/s on the fresh server; then 1,000 clients x 100 msg/s
  (the burst); a quiet pause; then 100 x 50 msg/s again. Reported: p50 and p99 of both, and
  the after / fresh ratios against the bounds ``p50 <= 1.5 x fresh + 1 ms`` and
  ``p99 <= max(2 x fresh, 15 ms)``;
- **a ramp**: 100 clients at 1,000, 2,000, 5,000, 10,000 and 20,000 msg/s on the same server
  (its broker's log grows from step to step): each step's delivered fraction and p99.

The topic has 3 partitions and the producer writes record n to partition n % 3, a record batch per
partition per linger: the most batches a keyless producer can write. ``--partitions 12 --placed``
is a topic sized for 20,000 msg/s, its keyless records placed by librdkafka's own partitioner
(sticky: a batch's worth to one partition, then the next), as an application's are.

    python bench/after_burst.py --output docs/benchmarks.md
    python bench/after_burst.py --partitions 12 --placed
    python bench/after_burst.py --no-ramp --burst-seconds 10 --json rows.json   # the regression guard's run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.compare import CLIENT_NAMES, CLIENTS, Row, run_load  # noqa: E402
from bench.lib.cload import build, gcc_available  # noqa: E402
from bench.lib.procstats import fd_limit_raise, loadavg, machine_description  # noqa: E402
from bench.lib.report import git_commit, output_write  # noqa: E402
from bench.lib.servers import SluiceServer  # noqa: E402

SECTION_BEGIN = "<!-- bench/after_burst.py results: begin -->"
SECTION_END = "<!-- bench/after_burst.py results: end -->"
RAMP = (1000.0, 2000.0, 5000.0, 10000.0, 20000.0)


@dataclass
class Verdict:
    """The after-burst figures against the bounds (milliseconds)."""

    fresh_p50: float
    fresh_p99: float
    after_p50: float
    after_p99: float
    p50_bound: float = 0.0
    p99_bound: float = 0.0

    def __post_init__(self) -> None:
        self.p50_bound = 1.5 * self.fresh_p50 + 1.0
        self.p99_bound = max(2 * self.fresh_p99, 15.0)

    @property
    def p50_ratio(self) -> float:
        return self.after_p50 / max(self.fresh_p50, 1e-9)

    @property
    def p99_ratio(self) -> float:
        return self.after_p99 / max(self.fresh_p99, 1e-9)

    @property
    def met(self) -> bool:
        return self.after_p50 <= self.p50_bound and self.after_p99 <= self.p99_bound


def line(label: str, row: Row, wanted: int) -> str:
    share = 100.0 * (1 - row.lost / max(1, wanted))
    return (
        f"| {label} | {row.opened}/{row.clients} | {row.rate:g} | {row.deliveries_per_s:,.0f} | {share:.1f} % | "
        f"{row.p50_ms:.1f} ms | {row.p99_ms:.1f} ms | {row.max_ms:.1f} ms | {row.lost:,} | {row.disconnects} | "
        f"{row.server_cpu:.0f} % | {row.other_cpu:.0f} % |"
    )


HEADER = (
    "| step | clients | rate (msg/s) | deliveries/s | delivered | p50 | p99 | max | lost | cut | server CPU "
    "| other CPU |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


async def run(args: argparse.Namespace) -> tuple[list[tuple[str, Row, int]], Verdict | None]:
    steps: list[tuple[str, Row, int]] = []
    verdict: Verdict | None = None
    with tempfile.TemporaryDirectory(prefix="sluice-after-burst-") as tmp:
        server = SluiceServer(
            Path(tmp), producer_linger_ms=args.producer_linger_ms, partitions=args.partitions, placed=args.placed
        )
        server.start()
        try:

            async def step(label: str, clients: int, rate: float, seconds: float) -> Row:
                row = await run_load(server, label, clients, rate, seconds, 0, args.drain, args.client)
                wanted = clients * max(1, round(rate * seconds))
                steps.append((label, row, wanted))
                share = 100.0 * (1 - row.lost / max(1, wanted))
                print(
                    f"  {label}: {clients} x {rate:g}: p50 {row.p50_ms:.1f} p99 {row.p99_ms:.1f} "
                    f"max {row.max_ms:.1f} ms, "
                    f"delivered {share:.1f} %, server {row.server_cpu:.0f} %, other {row.other_cpu:.0f} %",
                    flush=True,
                )
                await asyncio.sleep(1.0)
                return row

            fresh = await step("fresh", args.clients, args.rate, args.seconds)
            await step("burst", args.burst_clients, args.burst_rate, args.burst_seconds)
            print(f"  pause {args.pause:g} s", flush=True)
            await asyncio.sleep(max(0.0, args.pause - 1.0))
            after = await step("after the burst", args.clients, args.rate, args.seconds)
            verdict = Verdict(fresh.p50_ms, fresh.p99_ms, after.p50_ms, after.p99_ms)
            print(
                f"  after / fresh: p50 {verdict.p50_ratio:.2f}x (bound {verdict.p50_bound:.1f} ms), "
                f"p99 {verdict.p99_ratio:.2f}x (bound {verdict.p99_bound:.1f} ms): "
                f"{'met' if verdict.met else 'NOT met'}",
                flush=True,
            )
            if args.ramp:
                for rate in args.ramp:
                    await step(f"ramp {rate:g}", args.ramp_clients, rate, args.ramp_seconds)
        finally:
            server.stop()
    return steps, verdict


def placement(args: argparse.Namespace) -> str:
    return "placed by librdkafka's partitioner" if args.placed else f"round-robin (n % {args.partitions})"


def section(steps: list[tuple[str, Row, int]], verdict: Verdict | None, args: argparse.Namespace, load: str) -> str:
    command = shlex.join(["python", "bench/after_burst.py", *sys.argv[1:]])
    parts = [
        SECTION_BEGIN,
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit `{git_commit()}` on {machine_description()}; load "
        f"average before -> after: {load}. One gateway (`runstreams --workers 1`) and one embedded broker for every "
        f"step, the producer's `linger.ms` {args.producer_linger_ms:g}, {args.partitions} partitions, records "
        f"{placement(args)}; CPU is % of ONE core. Load client: "
        f"{CLIENT_NAMES[args.client]}.",
        "",
        "```",
        command,
        "```",
        "",
        HEADER,
        *(line(label, row, wanted) for label, row, wanted in steps),
    ]
    if verdict is not None:
        parts += [
            "",
            f"After the burst ({args.burst_clients:,} x {args.burst_rate:g} msg/s for {args.burst_seconds:g} s, then "
            f"{args.pause:g} s quiet): p50 {verdict.after_p50:.1f} ms against {verdict.fresh_p50:.1f} fresh "
            f"({verdict.p50_ratio:.2f}x; bound 1.5 x fresh + 1 ms = {verdict.p50_bound:.1f}), p99 "
            f"{verdict.after_p99:.1f} against {verdict.fresh_p99:.1f} ({verdict.p99_ratio:.2f}x; bound "
            f"{verdict.p99_bound:.1f}): **{'met' if verdict.met else 'not met'}**.",
        ]
    parts.append(SECTION_END)
    return "\n".join(parts)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100, help="Clients before and after the burst.")
    parser.add_argument("--rate", type=float, default=50.0, help="msg/s before and after the burst.")
    parser.add_argument("--seconds", type=float, default=10.0, help="Seconds of publishing before and after.")
    parser.add_argument("--burst-clients", type=int, default=1000)
    parser.add_argument("--burst-rate", type=float, default=100.0)
    parser.add_argument("--burst-seconds", type=float, default=20.0)
    parser.add_argument("--pause", type=float, default=10.0, help="Quiet seconds between the burst and the after run.")
    parser.add_argument("--ramp-clients", type=int, default=100)
    parser.add_argument(
        "--ramp", default=",".join(f"{r:g}" for r in RAMP), help="Comma list of ramp rates (msg/s); '' for none."
    )
    parser.add_argument("--no-ramp", dest="ramp", action="store_const", const="")
    parser.add_argument("--ramp-seconds", type=float, default=5.0)
    parser.add_argument("--drain", type=float, default=10.0, help="Seconds to wait for stragglers after each step.")
    parser.add_argument("--producer-linger-ms", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=3, help="Partitions of the topic.")
    parser.add_argument(
        "--placed", action="store_true", help="Leave keyless records to librdkafka's partitioner (sticky)."
    )
    parser.add_argument("--client", choices=CLIENTS, default="c" if gcc_available() else "python")
    parser.add_argument("--output", type=Path, help="Markdown file whose after_burst section is replaced.")
    parser.add_argument("--json", type=Path, help="Also write the steps and the verdict as JSON.")
    args = parser.parse_args(argv)
    args.ramp = [float(r) for r in args.ramp.split(",") if r]
    return args


def main(argv: list[str] | None = None) -> Verdict | None:
    import uvloop

    args = arguments(argv)
    fd_limit_raise(max(args.burst_clients, args.clients, args.ramp_clients) + 1024)
    if args.client == "c":
        try:
            build()
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from exc
    before = loadavg()
    print(f"{machine_description()}; load average {before}", flush=True)
    steps, verdict = uvloop.run(run(args))
    text = section(steps, verdict, args, f"{before} -> {loadavg()}")
    print()
    print(text)
    if args.output:
        output_write(args.output, text, SECTION_BEGIN, SECTION_END)
        print(f"\nwrote {args.output}")
    if args.json:
        figures = None
        if verdict is not None:
            figures = {**asdict(verdict), "p50_ratio": verdict.p50_ratio, "p99_ratio": verdict.p99_ratio}
            figures["met"] = verdict.met
        out = {"steps": [{"step": label, "wanted": wanted, **asdict(row)} for label, row, wanted in steps]}
        out["verdict"] = figures
        args.json.write_text(json.dumps(out, indent=1))
    return verdict


if __name__ == "__main__":
    main()
