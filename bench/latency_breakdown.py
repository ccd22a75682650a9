"""Where the milliseconds of a delivery go: broker, thread hop, fan-out, socket and client.

Runs compare.py's fan-out load (``--clients`` streams, ``--rate`` msg/s, the same
producer with ``linger.ms`` 1) against Sluice's gateway, with timestamps taken inside
the gateway by a ``sitecustomize`` module put on its ``PYTHONPATH`` (nothing in Sluice
knows about it). For every record it notes when the hub's fetch thread handed the
batch over (after librdkafka gave it the messages and the records were made), when
the event loop started the batch's fan-out, and when the last stream's write of it
returned; the load client notes the receipt. A bare confluent-kafka consumer on the
same broker and producer (``bench/broker_latency.py``'s) runs in the same scenario for
comparison::

    python bench/latency_breakdown.py --clients 100 --rate 100 --duration 10
    python bench/latency_breakdown.py --clients 10000 --rate 10000 --keyed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.compare import run_load
from bench.lib.inside import signal_answer, site_install
from bench.lib.servers import SluiceServer
from streams.server.broker import EmbeddedBroker

SITECUSTOMIZE = r"""
import json, os, re, signal, time
from streams.fanout import handoff as _handoff, hub as _hub
from streams.core.records import Record as _Record

_TS = re.compile(rb'"ts":(\d+)')
_handed = {}
_notes = []
_put, _ingest = _handoff.BatchHandoff.put, _hub.TopicHub.ingest

def _put_noted(self, batch):
    _handed[id(batch)] = time.time_ns()
    _put(self, batch)

def _ingest_noted(self, batch):
    started = time.time_ns()
    _ingest(self, batch)
    written = time.time_ns()
    handed = _handed.pop(id(batch), started)
    for record in batch:
        if type(record) is _Record and record.value:
            found = _TS.search(record.value)
            if found:
                _notes.append((int(found.group(1)), handed, started, written, len(batch)))

_handoff.BatchHandoff.put, _hub.TopicHub.ingest = _put_noted, _ingest_noted

import gc
_pauses = []
_collecting = [0]

def _collection(phase, info):
    if phase == "start":
        _collecting[0] = time.perf_counter_ns()
    else:
        _pauses.append((info["generation"], time.perf_counter_ns() - _collecting[0]))

gc.callbacks.append(_collection)

def _dump(signum, frame):
    target = os.environ["SLUICE_BENCH_NOTES"]
    with open(target + ".tmp", "w") as out:
        json.dump({"records": _notes, "collections": _pauses}, out)
    os.replace(target + ".tmp", target)
    _notes.clear()
    _pauses.clear()

signal.signal(signal.SIGUSR2, _dump)
"""


def notes_read(pid: int, path: Path) -> dict[str, list[list[int]]]:
    """What the gateway noted since the last read: ``records`` and the collector's pauses (``collections``)."""
    notes: dict[str, list[list[int]]] = json.loads(signal_answer(pid, signal.SIGUSR2, path, timeout=60).read_text())
    return notes


def quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--drain", type=float, default=5.0)
    parser.add_argument("--keyed", action="store_true", help="Each client on its own key (the keyed scenario).")
    args = parser.parse_args()

    broker = EmbeddedBroker().start()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        notes_path = tmp / "notes.json"
        site_install(tmp, SITECUSTOMIZE, SLUICE_BENCH_NOTES=str(notes_path))
        server = SluiceServer(tmp, broker)
        server.start()
        try:
            assert server.process is not None
            notes_read(server.process.pid, notes_path)  # what the first stream's start fetched
            loadavg = os.getloadavg()
            keys = args.clients if args.keyed else 0
            scenario = "keyed" if args.keyed else "fanout"
            row = await run_load(server, scenario, args.clients, args.rate, args.duration, keys, args.drain, client="c")
            noted = notes_read(server.process.pid, notes_path)
        finally:
            server.stop()
            broker.stop()
    notes, collections = noted["records"], noted["collections"]
    if not notes:
        raise SystemExit("no record was noted")
    ms = 1e6
    stages = [
        ("produce call -> handed over by the fetch thread (producer linger, broker, librdkafka)", 0, 1),
        ("handed over -> fan-out starts on the event loop (the thread hop)", 1, 2),
        ("fan-out starts -> the batch's last stream written (hub, frames, socket sends)", 2, 3),
    ]
    print(
        f"{len(notes)} records, {args.clients} clients{' each on its own key' if args.keyed else ''} x "
        f"{args.rate:g} msg/s for {args.duration:g} s; "
        f"load average before {loadavg[0]:.2f}; records per fetched batch: median "
        f"{quantiles([n[4] for n in notes])[0]:.0f}\n"
    )
    print("| stage | p50 | p99 |\n|---|---:|---:|")
    for name, start, end in stages:
        p50, p99 = quantiles([(n[end] - n[start]) / ms for n in notes])
        print(f"| {name} | {p50:.2f} ms | {p99:.2f} ms |")
    p50, p99 = quantiles([(n[3] - n[0]) / ms for n in notes])
    print(f"| produce call -> last stream written | {p50:.2f} ms | {p99:.2f} ms |")
    print(f"| produce call -> received by the clients (the load client) | {row.p50_ms:.2f} ms | {row.p99_ms:.2f} ms |")
    print(f"\nlost {row.lost}, gateway CPU {row.server_cpu:.0f} % of a core, load client {row.client_cpu:.0f} %")
    print("\nThe cycle collector's pauses while the streams opened and the load ran (they stop the event loop):")
    for generation in (0, 1, 2):
        pauses = [ns / ms for gen, ns in collections if gen == generation]
        if pauses:
            print(
                f"  generation {generation}: {len(pauses)} collections, longest {max(pauses):.1f} ms, "
                f"{sum(pauses):.0f} ms in all"
            )


if __name__ == "__main__":
    asyncio.run(main())
