"""Value filters (``where``) in the hub's fan-out beside key filters: in process, and through the gateway.

In process (no broker, no sockets): N live streams share F distinct filters
(stream i has filter i mod F); each record matches one filter, so it goes to N/F
streams. Three kinds of filter, on 200-byte JSON records:

- ``value``: ``value.match.team == "t<j>" and value.match.goals >= 0``, whose
  equality the hub files the filter under (read once per record, a dictionary lookup);
- ``scan``: ``value.match.team in ["t<j>"] and value.match.goals >= 0``, the same
  records, but no equality to file it under: every distinct filter is tested per record;
- ``key``: a key filter naming the key ``t<j>`` (today's per-user shape).

Prints µs of hub CPU per record and per delivery, and the share of one core a given
rate takes. The hub tests each distinct filter once per record, whatever the number of
streams that share it: the cost grows with F (``scan``), not with N.

``--wire`` runs the same shape through a real gateway (``manage.py runstreams``, the
embedded broker, a producer process, the C load client in its own process so that
10,000 client sockets and the gateway's own stay under each process's descriptor
limit): N streams over F distinct filters, ``/bench/value/k<j>`` (``where: value.team ==
"${params.team}"``) beside ``/bench/keyed/k<j>`` (a key filter), at each rate of
``--wire-rates`` until one holds (nothing lost, no stream cut, p99 under 1 s, the
producer on time). µs per delivery there is the gateway's CPU per event received.

``--language`` times the expression language itself, against CEL libraries when
they are importable (they are not Sluice's dependencies: install them into a
separate virtualenv to compare).

    python bench/value_filters.py --streams 2000,5000,10000 --filters 1000
    python bench/value_filters.py --streams 10000 --filters 10,100,1000
    python bench/value_filters.py --hub-off --wire --wire-streams 10000 --wire-filters 1000 --wire-rates 10000,5000
    python bench/value_filters.py --streams 1000 --filters 10,100 --language
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import Row, run_load, started
from bench.ingest import CollectingSink, hub_make
from bench.lib.cload import build
from bench.lib.processes import Child, producer_main
from bench.lib.procstats import fd_limit_raise, loadavg, machine_description
from bench.lib.report import git_commit, number_list, output_write
from bench.lib.servers import SluiceServer
from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.core.templating import ExpansionContext
from streams.core.where import Subject, where_resolve, where_template
from streams.core.where.compiler import where_compile
from streams.core.where.parser import where_parse
from streams.fanout.kafka import PartitionEnd
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions

ROUTE_WHERE = {
    "value": 'value.match.team == "${params.team}" and value.match.goals >= 0',
    "scan": 'value.match.team in ["${params.team}"] and value.match.goals >= 0',
}
KINDS = ("value", "scan", "key")
# Through the gateway: the producer writes the record's key into its value's ``team`` field too.
WIRE_WHERE = 'value.team == "${params.team}"'
SECTION_BEGIN = "<!-- bench/value_filters.py results: begin -->"
SECTION_END = "<!-- bench/value_filters.py results: end -->"
LANGUAGE_EXPRESSION = 'value.match.goals > 3 && value.match.league == "EU" && value.match.minute >= 60'
LANGUAGE_DOCUMENT = {"match": {"league": "EU", "goals": 4, "minute": 67, "team": "t1"}, "pad": "x" * 120}


def stream_filters(kind: str, team: int) -> FilterSet:
    if kind == "key":
        return FilterSet((MessageFilter(key=b"t%d" % team),))
    where = where_resolve(where_template(ROUTE_WHERE[kind]), ExpansionContext({"team": f"t{team}"}), None)
    return FilterSet((), where)


def batch_make(offsets: dict[int, int], start: int, size: int, filters: int) -> list[Record | PartitionEnd]:
    batch: list[Record | PartitionEnd] = []
    for count in range(start, start + size):
        p = count % 3
        team = count % filters
        value = json.dumps({"seq": count, "match": {"team": f"t{team}", "goals": count % 5}, "pad": "x" * 120})
        batch.append(Record(p, offsets[p], 0, b"t%d" % team, value.encode()))
        offsets[p] += 1
    return batch


async def fan_out_cost(kind: str, streams: int, filters: int, batches: int, size: int) -> tuple[float, float]:
    """µs of hub CPU per record and per delivery (in process)."""
    hub = hub_make(3)
    sinks = []
    for n in range(streams):
        sink = CollectingSink()
        options = SubscriberOptions(filters=stream_filters(kind, n % filters), route="/bench")
        hub.subscribe(Subscriber(sink, options), StartPlan(dict(hub.next)), 2000)
        sinks.append(sink)
    offsets = dict.fromkeys(range(3), 0)
    elapsed = 0.0
    deliveries_before = hub.counters.deliveries
    for index in range(batches):
        batch = batch_make(offsets, index * size, size, filters)
        started = time.perf_counter()
        hub.ingest(batch)
        elapsed += time.perf_counter() - started
        if index % 20 == 0:
            for sink in sinks:
                sink.writes.clear()
    records = batches * size
    deliveries = hub.counters.deliveries - deliveries_before
    return elapsed / records * 1e6, elapsed / max(deliveries, 1) * 1e6


def timed(call: Any, times: int) -> float:
    started = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - started) / times * 1e6


def language_rows() -> list[tuple[str, str, str]]:
    """(implementation, compile µs, evaluate µs) on the same expression and record."""
    raw = json.dumps(LANGUAGE_DOCUMENT).encode()
    record = Record(0, 0, 0, b"t1", raw)
    text = LANGUAGE_EXPRESSION.replace("&&", "and")
    where = where_compile(where_parse(text))
    parsed = Subject(record)
    parsed.value()
    rows = [
        (
            "closure tree (Sluice)",
            f"{timed(lambda: where_compile.__wrapped__(where_parse(text)), 500):.1f}",
            f"{timed(lambda: where.test(parsed), 100000):.2f} (+ JSON parse once per record: "
            f"{timed(lambda: json.loads(raw), 20000):.1f})",
        ),
    ]
    try:
        import celpy  # cel-python, pure Python

        env = celpy.Environment()
        program = env.program(env.compile(LANGUAGE_EXPRESSION))
        activation = {"value": celpy.json_to_cel(LANGUAGE_DOCUMENT)}
        compile_us = timed(lambda: env.program(env.compile(LANGUAGE_EXPRESSION)), 50)
        rows.append(("cel-python", f"{compile_us:.1f}", f"{timed(lambda: program.evaluate(activation), 2000):.2f}"))
    except ImportError:
        rows.append(("cel-python", "not installed", ""))
    try:
        import cel  # common-expression-language, Rust-backed

        program = cel.compile(LANGUAGE_EXPRESSION)
        context = {"value": LANGUAGE_DOCUMENT}
        rows.append(
            (
                "common-expression-language (Rust)",
                f"{timed(lambda: cel.compile(LANGUAGE_EXPRESSION), 500):.1f}",
                f"{timed(lambda: program.execute(context), 20000):.2f}",
            )
        )
    except ImportError:
        rows.append(("common-expression-language (Rust)", "not installed", ""))
    return rows


def hub_table(args: argparse.Namespace) -> list[str]:
    """One row per streams, filters and kind of filter: the hub's CPU in process."""
    lines = [
        "| streams | distinct filters | filter | µs / record | µs / delivery | deliveries / record | CPU at rate |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for streams in number_list(args.streams):
        for filters in number_list(args.filters):
            for kind in args.kinds.split(","):
                runs = [
                    asyncio.run(fan_out_cost(kind, streams, filters, args.batches, args.batch_size))
                    for _ in range(args.repeat)
                ]
                per_record, per_delivery = min(runs)
                lines.append(
                    f"| {streams:,} | {filters:,} | {kind} | {per_record:.1f} | {per_delivery:.2f} | "
                    f"{streams // filters:,} | {per_record * args.rate / 1e4:.0f} % |"
                )
                print(lines[-1], flush=True)
    return lines


class FilteredSluice(SluiceServer):
    """compare.py's Sluice with a value-filter route beside its key-filter one; ``kind`` picks the streams' route.

    The records carry their key (``k<seq % filters>``) in their value's ``team`` field too, so the two
    routes pick the same records, one by the key and one by the value.
    """

    def __init__(self, tmp: Path, kind: str) -> None:
        super().__init__(tmp)
        self.kind = kind
        self.name = f"sluice-{kind}"

    def routes_more(self) -> str:
        return f"route_upsert(path='/bench/value/{{team}}', topic={self.topic!r}, where={WIRE_WHERE!r})"

    def path(self, key: str | None) -> str:
        # The C client's %k: the stream's index modulo the distinct filters.
        return ("/bench/value/" if self.kind == "value" else "/bench/keyed/") + "k%k"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        linger_ms = 0.0 if rate <= 1000 else 5.0  # as compare.py's Sluice: throughput-minded above 1,000/s
        return Child(producer_main, self.broker.bootstrap, self.topic, 3, rate, count, size, linger_ms, keys, "", True)


def wire_line(r: Row, filters: int) -> str:
    held = "yes" if r.passed else "no"
    return (
        f"| {r.opened:,}/{r.clients:,} | {filters:,} | {r.scenario} | {r.rate:,.0f} | {r.deliveries_per_s:,.0f} "
        f"({r.expected_per_s:,.0f}) | {r.p50_ms:.1f} ms | {r.p99_ms:.1f} ms | {r.lost:,} | {r.disconnects} | "
        f"{r.server_cpu:.0f} % | {r.us_per_delivery:.2f} | {r.client_cpu:.0f} % | {r.other_cpu:.0f} % | {held} |"
    )


async def wire_table(args: argparse.Namespace) -> list[str]:
    """Through a real gateway: per streams, filters and kind, the rates of ``--wire-rates`` until one holds."""
    lines = [
        "| streams | distinct filters | filter | rate (msg/s) | deliveries/s (expected) | p50 | p99 | lost | cut "
        "| gateway CPU | µs / delivery | client CPU | other CPU | held |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="sluice-value-filters-") as tmp:
        for streams in number_list(args.wire_streams):
            for filters in number_list(args.wire_filters):
                for kind in ("value", "key"):
                    for rate in number_list(args.wire_rates, float):
                        server = FilteredSluice(Path(tmp), kind)
                        with started(server):
                            row = await run_load(server, kind, streams, rate, args.duration, filters, args.drain, "c")
                        lines.append(wire_line(row, filters))
                        print(lines[-1], flush=True)
                        if row.passed:
                            break
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1000", help="Live streams in process; comma list.")
    parser.add_argument("--filters", default="10,100", help="Distinct filters in process; comma list.")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"Filters in process, of {', '.join(KINDS)}.")
    parser.add_argument("--rate", type=int, default=10000, help="Records per second the CPU share is given for.")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="Runs per case in process; the best is shown.")
    parser.add_argument("--hub-off", action="store_true", help="Leave out the in-process table.")
    parser.add_argument("--wire", action="store_true", help="Also run through a gateway (the C load client).")
    parser.add_argument("--wire-streams", default="10000", help="Streams through the gateway; comma list.")
    parser.add_argument("--wire-filters", default="1000", help="Distinct filters through the gateway; comma list.")
    parser.add_argument("--wire-rates", default="10000,5000,2500", help="Rates tried in turn until one holds.")
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds of publishing through the gateway.")
    parser.add_argument("--drain", type=float, default=10.0, help="Seconds to wait for stragglers.")
    parser.add_argument("--language", action="store_true", help="Also time the expression language against CEL.")
    parser.add_argument("--output", type=Path, help="Replace this script's section of this Markdown file.")
    args = parser.parse_args()
    command = shlex.join(["python", "bench/value_filters.py", *sys.argv[1:]])
    when = datetime.now(UTC)
    before = loadavg()
    print(f"{machine_description()}; load average {before}\n", flush=True)
    parts: list[str] = []
    if not args.hub_off:
        parts += ["#### In process: the hub's CPU", "", *hub_table(args), ""]
    if args.wire:
        fd_limit_raise(max(number_list(args.wire_streams)) + 1024)
        build()  # the C load client, before any gateway starts
        parts += ["#### Through the gateway", "", *asyncio.run(wire_table(args)), ""]
    if args.language:
        parts += [f"`{LANGUAGE_EXPRESSION}` over one record:", "", "| implementation | compile µs | evaluate µs |"]
        parts += ["|---|---:|---:|", *(f"| {n} | {c} | {e} |" for n, c, e in language_rows()), ""]
    head = (
        f"Run {when:%Y-%m-%d %H:%M} UTC at commit `{git_commit()}` on {machine_description()}; "
        f"load average before -> after: {before} -> {loadavg()}."
    )
    text = "\n".join([SECTION_BEGIN, head, "", "```", command, "```", "", *parts, SECTION_END])
    print("\n" + text)
    if args.output:
        output_write(args.output, text, SECTION_BEGIN, SECTION_END)
        print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
