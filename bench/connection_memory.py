"""What one idle stream holds in the gateway, by allocation site (tracemalloc).

Starts Sluice's gateway (one worker, the embedded broker) with tracemalloc on,
opens ``--base`` idle streams, takes a snapshot, opens ``--clients`` more, takes
another, and prints the difference per connection, largest first, with the RSS
per connection beside it::

    python bench/connection_memory.py --clients 2000

The snapshots are taken inside the gateway by a ``sitecustomize`` module put on its
``PYTHONPATH`` (``SIGUSR2`` writes one), so nothing in Sluice knows about it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.inside import signal_answer, site_install
from bench.lib.procstats import tree_rss_bytes
from bench.lib.servers import SluiceServer
from bench.lib.sseload import Stats, clients_open
from streams.server.broker import EmbeddedBroker

SITECUSTOMIZE = """
import os, signal, tracemalloc
tracemalloc.start(int(os.environ.get("SLUICE_BENCH_TRACE_FRAMES", "1")))
def _dump(signum, frame):
    target = os.environ["SLUICE_BENCH_SNAPSHOT"]
    tracemalloc.take_snapshot().dump(target + ".tmp")
    os.replace(target + ".tmp", target)
signal.signal(signal.SIGUSR2, _dump)
def _census(signum, frame):
    import gc, json, sys
    counts = {}
    for obj in gc.get_objects():
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        entry = counts.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
    target = os.environ["SLUICE_BENCH_SNAPSHOT"] + ".census"
    with open(target + ".tmp", "w") as out:
        json.dump(counts, out)
    os.replace(target + ".tmp", target)
signal.signal(signal.SIGUSR1, _census)
"""


def snapshot(pid: int, path: Path) -> tracemalloc.Snapshot:
    return tracemalloc.Snapshot.load(str(signal_answer(pid, signal.SIGUSR2, path)))


def census(pid: int, path: Path) -> dict[str, list[int]]:
    """Objects the collector tracks in the gateway, by type: ``{type: [count, bytes]}`` (shallow sizes)."""
    found: dict[str, list[int]] = json.loads(signal_answer(pid, signal.SIGUSR1, Path(f"{path}.census")).read_text())
    return found


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--base", type=int, default=50)
    parser.add_argument("--frames", type=int, default=1, help="Traceback depth kept by tracemalloc.")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    broker = EmbeddedBroker().start()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        snap_path = tmp / "snapshot.bin"
        site_install(
            tmp, SITECUSTOMIZE, SLUICE_BENCH_SNAPSHOT=str(snap_path), SLUICE_BENCH_TRACE_FRAMES=str(args.frames)
        )
        server = SluiceServer(tmp, broker)
        server.start()
        assert server.process is not None
        pid = server.process.pid
        stats = Stats()
        opened = []
        try:
            path = server.path(None)
            opened += await clients_open(server.port, args.base, stats, 0, path_of=lambda _: path)
            await asyncio.sleep(2.0)
            rss_before = tree_rss_bytes(server.pids())
            before = snapshot(pid, snap_path)
            types_before = census(pid, snap_path)
            opened += await clients_open(
                server.port, args.clients, stats, 0, path_of=lambda _: path, first=args.base, concurrency=100
            )
            await asyncio.sleep(3.0)
            rss_after = tree_rss_bytes(server.pids())
            after = snapshot(pid, snap_path)
            types_after = census(pid, snap_path)
        finally:
            for client in opened:
                client.close()
            server.stop()
            broker.stop()
    stats_by_line = after.compare_to(before, "lineno" if args.frames == 1 else "traceback")
    traced = sum(stat.size_diff for stat in stats_by_line)
    n = args.clients
    print(
        f"{n} idle streams: RSS {(rss_after - rss_before) / n / 1024:.1f} KiB each, "
        f"traced by Python {traced / n / 1024:.1f} KiB each"
    )
    for stat in stats_by_line[: args.top]:
        where = stat.traceback.format()[-1].strip() if args.frames > 1 else str(stat.traceback[0])
        print(f"{stat.size_diff / n:8.0f} B  {stat.count_diff / n:6.2f} blocks  {where}")
    print(f"\nObjects the garbage collector tracks, per stream, by type (shallow sizes; top {args.top}):")
    grown = []
    for name, (count, size) in types_after.items():
        count_before, size_before = types_before.get(name, (0, 0))
        grown.append((size - size_before, count - count_before, name))
    for size, count, name in sorted(grown, reverse=True)[: args.top]:
        print(f"{size / n:8.0f} B  {count / n:6.2f} objects  {name}")


if __name__ == "__main__":
    asyncio.run(main())
