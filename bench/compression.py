"""What compressing a stream costs and saves: bytes on the wire and CPU per delivery, memory per stream.

Frames are the ones a stream is written (``id:`` and ``data:`` lines, from
:mod:`streams.core.sse`), for two payloads: the demo's score update (about 150 bytes
of JSON, ``demo/scores.py``) and a 1 KB JSON document whose field names repeat and
whose values change. Each frame is one write, as at 100 msg/s where every batch holds
one record: compressed and flushed on its own (the worst case for compression).

CPU is the encoder's process time per write, in one process (the rest of a delivery
is the same with or without it), and the first write after the stream rested (a
heartbeat: the compressor is taken again). Memory is RSS per stream for N encoders
in a fresh process (Brotli's and zlib's tables are C allocations tracemalloc does not
see), the C heap trimmed before each reading as the gateway does every 5 minutes:
just opened (the preamble written), after 10 events, idle (a heartbeat after them) and
after 1,000 events (a window filled). ``--settings`` sweeps Brotli's quality and
``lgwin`` and zlib's ``wbits`` and ``memLevel``: bytes and memory per stream for each.

    python bench/compression.py --events 2000 --streams 2000 [--settings]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import multiprocessing
import os
import random
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import brotli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.core.compression import BrotliEncoder, GzipEncoder
from streams.core.ids import progress_encode
from streams.core.sse import HEARTBEAT, event_body, event_frame, preamble
from streams.server.collector import heap_trim

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


# A stream's first write: its reconnection delay and start checkpoint.
PREAMBLE = preamble(3000, progress_encode({0: 0}))

Encode = Callable[[bytes], bytes]


def wire_and_cpu(frames: list[bytes], make: Callable[[], Encode] | None) -> tuple[float, float]:
    """Mean bytes written per event and microseconds of CPU per write (one stream, one frame per write)."""
    if make is None:
        return sum(len(f) for f in frames) / len(frames), 0.0
    encode = make()
    encode(PREAMBLE)
    started = time.process_time()
    total = sum(len(encode(frame)) for frame in frames)
    cpu = time.process_time() - started
    return total / len(frames), cpu / len(frames) * 1e6


def wake_cpu(frames: list[bytes], make: Callable[[], Encode], streams: int, before: int) -> float:
    """Microseconds of CPU for the first event after a heartbeat, on streams that wrote ``before`` events."""
    encoders = []
    for _ in range(streams):
        encode = make()
        for frame in (PREAMBLE, *frames[:before], HEARTBEAT):
            encode(frame)
        encoders.append(encode)
    started = time.process_time()
    for encode in encoders:
        encode(frames[before])
    return (time.process_time() - started) / streams * 1e6


def rss() -> int:
    heap_trim()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def stream_memory(frames: list[bytes], make: Callable[[], Encode], streams: int, state: str) -> float:
    """RSS per stream held by ``streams`` encoders in ``state`` (one of STATES)."""
    gc.collect()
    before = rss()
    encoders = []
    writes = {"opened": [], "active": frames[:10], "idle": [*frames[:10], HEARTBEAT], "full": frames[:1000]}[state]
    for _ in range(streams):
        encode = make()
        encode(PREAMBLE)
        for frame in writes:
            encode(frame)
        encoders.append(encode)
    return (rss() - before) / streams


STATES = {
    "opened": "opened",
    "active": "after 10 events",
    "idle": "idle (10 events, a heartbeat)",
    "full": "after 1,000 events",
}


def in_fresh_process(function: Callable[..., float], *args: object) -> float:
    """``function(*args)`` in a process of its own: what one measurement frees, the next would reuse unseen."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result: float = pool.apply(function, args)
    return result


class SettingsEncoder:
    """A flushed compressor over raw brotli or zlib with the given settings, without Sluice's rests."""

    def __init__(self, coding: str, first: int, second: int) -> None:
        self.coding, self.first, self.second = coding, first, second
        self.brotli = None if coding != "br" else brotli.Compressor(mode=brotli.MODE_TEXT, quality=first, lgwin=second)
        self.zlib = None if coding == "br" else zlib.compressobj(6, zlib.DEFLATED, -first, second)

    def __call__(self, data: bytes) -> bytes:
        if self.brotli is not None:
            return self.brotli.process(data) + self.brotli.flush()
        assert self.zlib is not None
        return self.zlib.compress(data) + self.zlib.flush(zlib.Z_SYNC_FLUSH)


def settings_sweep(score: list[bytes], kilobyte: list[bytes], streams: int) -> None:
    print("| coding | settings | score: bytes of plain | 1 KB JSON | per stream, 10 events | 1,000 events |")
    print("|---|---|---:|---:|---:|---:|")
    specs = [("br", q, w) for q in (0, 1, 2, 3, 4, 5, 6) for w in (10, 12, 16)]
    specs += [("gzip", w, m) for w in (9, 10, 11, 12, 15) for m in (1, 2, 5, 8)]
    for spec in specs:
        make = functools.partial(SettingsEncoder, *spec)
        ratios = [wire_and_cpu(frames, make)[0] / (sum(map(len, frames)) / len(frames)) for frames in (score, kilobyte)]
        held = [
            in_fresh_process(stream_memory, score, make, n, state)
            for n, state in ((streams, "active"), (max(50, streams // 10), "full"))
        ]
        names = ("quality", "lgwin") if spec[0] == "br" else ("wbits", "memLevel")
        label = f"{names[0]} {spec[1]}, {names[1]} {spec[2]}"
        print(
            f"| {spec[0]} | {label} | {ratios[0]:.3f} | {ratios[1]:.3f} "
            f"| {held[0] / 1024:.1f} KB | {held[1] / 1024:.1f} KB |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--settings", action="store_true", help="Sweep the compressors' settings instead.")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    score, kilobyte = frames_of(score_payloads(args.events)), frames_of(kilobyte_payloads(args.events))
    if args.settings:
        settings_sweep(score, kilobyte, args.streams)
        return
    print("| payload | coding | bytes per event | ratio | CPU per write (us) | after a rest: opened, 10 events (us) |")
    print("|---|---|---:|---:|---:|---:|")
    for label, frames in (("score", score), ("1 KB JSON", kilobyte)):
        plain = sum(len(f) for f in frames) / len(frames)
        for coding, make in ENCODERS.items():
            size, cpu = wire_and_cpu(frames, make)
            wakes = [in_fresh_process(wake_cpu, frames, make, 500, n) if make else 0.0 for n in (0, 10)]
            cells = f"{size:.0f} | {size / plain:.2f} | {cpu:.1f} | {wakes[0]:.1f}, {wakes[1]:.1f}"
            print(f"| {label} | {coding} | {cells} |")
    print()
    print("| coding | stream | RSS per stream (KB) |")
    print("|---|---|---:|")
    for coding in ("gzip", "br"):
        make = ENCODERS[coding]
        assert make is not None
        for state, label in STATES.items():
            n = args.streams if state != "full" else max(50, args.streams // 10)
            held = in_fresh_process(stream_memory, score, make, n, state)
            print(f"| {coding} | {label} | {held / 1024:.1f} |")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
