"""Value filters (``where``) in the hub's fan-out, beside key filters, in process (no broker, no sockets).

N live streams share F distinct filters (stream i has filter i mod F); each record
matches one filter, so it goes to N/F streams. Value filters are
``value.match.team == "t<j>" and value.match.goals >= 0`` over 200-byte JSON
records; key filters name the key ``t<j>``. Prints µs of hub CPU per record and
per delivery, and the share of one core that a given rate would take. The hub
evaluates each distinct filter once per record, so the value filters' cost
should grow with F, not with N.

``--language`` times the expression language itself, against CEL libraries when
they are importable (they are not Sluice's dependencies: install them into a
separate virtualenv to compare).

    python bench/value_filters.py --streams 10000 --filters 1000 --rate 10000
    python bench/value_filters.py --streams 1000 --filters 10,100 --language
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import CollectingSink, hub_make
from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.core.templating import ExpansionContext
from streams.core.where import Subject, where_resolve, where_template
from streams.core.where.compiler import where_compile
from streams.core.where.parser import where_parse
from streams.fanout.kafka import PartitionEnd
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions

ROUTE_WHERE = 'value.match.team == "${params.team}" and value.match.goals >= 0'
LANGUAGE_EXPRESSION = 'value.match.goals > 3 && value.match.league == "EU" && value.match.minute >= 60'
LANGUAGE_DOCUMENT = {"match": {"league": "EU", "goals": 4, "minute": 67, "team": "t1"}, "pad": "x" * 120}


def stream_filters(kind: str, team: int) -> FilterSet:
    if kind == "key":
        return FilterSet((MessageFilter(key=b"t%d" % team),))
    where = where_resolve(where_template(ROUTE_WHERE), ExpansionContext({"team": f"t{team}"}), None)
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
    """µs of hub CPU per record and per delivery."""
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1000", help="Live streams; comma list.")
    parser.add_argument("--filters", default="10,100", help="Distinct filters; comma list.")
    parser.add_argument("--rate", type=int, default=10000, help="Records per second the CPU share is given for.")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="Runs per case; the best is shown.")
    parser.add_argument("--language", action="store_true", help="Also time the expression language against CEL.")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print(
        "| streams | distinct filters | value: µs/record | value: µs/delivery | value: CPU at rate "
        "| key: µs/record | key: µs/delivery | key: CPU at rate |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for streams in (int(s) for s in args.streams.split(",")):
        for filters in (int(f) for f in args.filters.split(",")):
            cells = []
            for kind in ("value", "key"):
                runs = [
                    await fan_out_cost(kind, streams, filters, args.batches, args.batch_size)
                    for _ in range(args.repeat)
                ]
                per_record, per_delivery = min(runs)
                cells += [f"{per_record:.1f}", f"{per_delivery:.2f}", f"{per_record * args.rate / 1e4:.0f} %"]
            print(f"| {streams} | {filters} | " + " | ".join(cells) + " |")
    if args.language:
        print(f"\n`{LANGUAGE_EXPRESSION}` over one record:\n")
        print("| implementation | compile µs | evaluate µs |\n|---|---:|---:|")
        for name, compile_us, evaluate_us in language_rows():
            print(f"| {name} | {compile_us} | {evaluate_us} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
