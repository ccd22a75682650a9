"""What compressing a stream costs and saves: bytes on the wire and CPU per delivery, memory per stream.

Frames are the ones a stream is written (``id:`` and ``data:`` lines, from
:mod:`streams.core.sse`), for two payloads: the demo's score update (about 150 bytes
of JSON, ``demo/scores.py``) and a 1 KB JSON document whose field names repeat and
whose values change. Each frame is one write, as at 100 msg/s where every batch holds
one record: compressed and flushed on its own (the worst case for compression).

CPU is the encoder's process time per write, in one process (the rest of a delivery
is the same with or without it). Memory is RSS per stream for N streams that wrote
a few events and went idle (Brotli's tables are C allocations tracemalloc does not
see), and what tracemalloc sees of them.

    python bench/compression.py --events 2000 --streams 500
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.core.compression import BrotliEncoder, GzipEncoder
from streams.core.ids import progress_encode
from streams.core.sse import HEARTBEAT, event_body, event_frame

ENCODERS: dict[str, Callable[[], Callable[[bytes], bytes]] | None] = {
    "identity": None,
    "gzip": GzipEncoder,
    "br": BrotliEncoder,
}


def score_payloads(count: int) -> list[str]:
    """The demo's score updates (demo/scores.py's fields), a random walk over a few matches."""
    rng = random.Random(7)
    teams = ["Arsenal", "Chelsea", "Liverpool", "Everton", "Leeds United", "Fulham"]
    out = []
    for n in range(count):
        home, away = rng.sample(teams, 2)
        value = {
            "match": f"match-{n % 12}",
            "league": "premier",
            "home": home,
            "away": away,
            "score": [rng.randrange(5), rng.randrange(5)],
            "minute": rng.randrange(90),
            "ts": 1_790_000_000_000 + n * 10,
        }
        out.append(json.dumps(value))
    return out


def kilobyte_payloads(count: int) -> list[str]:
    """A 1 KB JSON document (an order with its lines) per event, values changing."""
    rng = random.Random(11)
    out = []
    for n in range(count):
        value: dict[str, object] = {"order": n, "customer": f"c-{rng.randrange(10**6)}", "status": "paid"}
        lines: list[dict[str, object]] = []
        value["lines"] = lines
        while len(json.dumps(value)) < 1024:
            sku = f"SKU-{rng.randrange(100000):06d}"
            lines.append({"sku": sku, "quantity": rng.randrange(1, 9), "price": rng.randrange(99, 9999)})
        out.append(json.dumps(value))
    return out


def frames_of(payloads: list[str]) -> list[bytes]:
    return [event_frame(progress_encode({0: n + 1}), event_body(text)) for n, text in enumerate(payloads)]


def wire_and_cpu(frames: list[bytes], make: Callable[[], Callable[[bytes], bytes]] | None) -> tuple[float, float]:
    """Mean bytes written per event and microseconds of CPU per write (one stream, one frame per write)."""
    if make is None:
        return sum(len(f) for f in frames) / len(frames), 0.0
    encode = make()
    started = time.process_time()
    total = sum(len(encode(frame)) for frame in frames)
    cpu = time.process_time() - started
    return total / len(frames), cpu / len(frames) * 1e6


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def stream_memory(
    frames: list[bytes], make: Callable[[], Callable[[bytes], bytes]], streams: int, idle: bool
) -> tuple[int, int]:
    """Bytes per stream (RSS, tracemalloc) held by ``streams`` encoders that wrote 10 events each.

    ``idle``: each was then sent a heartbeat (what an idle stream gets every heartbeat_seconds).
    """
    gc.collect()
    tracemalloc.start()
    before, traced_before = rss(), tracemalloc.get_traced_memory()[0]
    encoders = []
    for _ in range(streams):
        encode = make()
        for frame in frames[:10]:
            encode(frame)
        if idle:
            encode(HEARTBEAT)
        encoders.append(encode)
    after, traced = rss(), tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del encoders
    return (after - before) // streams, (traced - traced_before) // streams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=500)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print("| payload | coding | bytes per event | ratio | CPU per write (us) |")
    print("|---|---|---:|---:|---:|")
    for label, payloads in (("score", score_payloads(args.events)), ("1 KB JSON", kilobyte_payloads(args.events))):
        frames = frames_of(payloads)
        plain = sum(len(f) for f in frames) / len(frames)
        for coding, make in ENCODERS.items():
            size, cpu = wire_and_cpu(frames, make)
            print(f"| {label} | {coding} | {size:.0f} | {size / plain:.2f} | {cpu:.1f} |")
    print()
    print("| coding | stream | RSS per stream (KB) | tracemalloc per stream (KB) |")
    print("|---|---|---:|---:|")
    frames = frames_of(score_payloads(10))
    for coding in ("gzip", "br"):
        make = ENCODERS[coding]
        assert make is not None
        for idle in (False, True):
            # A fresh process for each: what one measurement frees, the next would reuse unseen.
            with multiprocessing.get_context("fork").Pool(1) as pool:
                held, traced = pool.apply(stream_memory, (frames, make, args.streams, idle))
            state = "idle (after a heartbeat)" if idle else "active"
            print(f"| {coding} | {state} | {held / 1024:.1f} | {traced / 1024:.1f} |")


if __name__ == "__main__":
    main()
