"""The C load client (``bench/lib/sseload.c``): built with gcc on first use, driven over its stdin and stdout.

It does what ``bench/lib/sseload.py``'s streams do (the same request, chunked decoding, ``seq`` and
``ts`` from each event's data line into the same latency histogram, a seen-map per stream) in a
child process of its own, at a fraction of the CPU: the parent's loop only exchanges a few lines
with it. Its CPU is the child's (``proc_cpu_seconds(clients.pid)``)::

    clients = await CClients(port, "/bench/keyed/k%d", count, keys=1000).start()
    await clients.open(1000)
    await clients.measure(True)
    ...  # publish
    await clients.wait(10.0)
    await clients.measure(False)
    result = await clients.report()  # result.stats is a bench.lib.sseload.Stats
    await clients.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.lib.sseload import BUCKETS, Stats

SOURCE = Path(__file__).resolve().with_name("sseload.c")
BUILD_DIR = SOURCE.parent.parent / ".build"
BINARY = BUILD_DIR / "sseload"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-std=gnu11"]
# The report is one JSON line with the histogram's non-empty buckets: allow long lines.
LINE_LIMIT = 64 * 1024 * 1024


def gcc_available() -> bool:
    return shutil.which("gcc") is not None


def build(binary: Path = BINARY) -> Path:
    """Compile ``sseload.c`` into ``binary`` unless the binary is newer than the source; the binary."""
    if binary.exists() and binary.stat().st_mtime >= SOURCE.stat().st_mtime:
        return binary
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError(
            f"the C load client ({SOURCE.relative_to(SOURCE.parents[2])}) needs gcc on PATH "
            "(apt-get install gcc); or use the Python client (bench/compare.py --client python)"
        )
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(f".{binary.name}.{os.getpid()}")  # renamed into place: concurrent builds are safe
    result = subprocess.run(
        [gcc, *CFLAGS, "-o", str(partial), str(SOURCE)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"gcc could not build {SOURCE}:\n{result.stderr}")
    os.replace(partial, binary)
    return binary


@dataclass
class CReport:
    """The C client's counts: ``stats`` as the Python client's (hist in full), and sums over the opened streams."""

    stats: Stats
    opened: int
    failed: int
    unique: int
    duplicates: int
    want: int
    complete: int
    closed: int
    out_of_range: int
    cpu_seconds: float


class CClients:
    """Streams ``/path`` with ``%d`` as the stream index, seqs ``0 .. count-1``, counted by the C client.

    Every stream wants all ``count`` seqs (or ``want``); with ``keys``, stream n wants n, n+keys, ... < count.
    Streams are ready once their first complete event arrived, or with ``ready_on_headers`` their response head.
    With ``sources``, stream n connects from 127.0.0.(1 + n % sources): each source address has its own
    ephemeral ports towards the server, so more than about 28,000 streams need several. With ``poll_us`` the
    client sleeps that long between waits that found few streams ready (see ``sseload.c``).
    """

    def __init__(
        self,
        port: int,
        path: str,
        count: int,
        *,
        keys: int = 0,
        want: int | None = None,
        ready_on_headers: bool = False,
        concurrency: int = 50,
        open_timeout: float = 30.0,
        sources: int = 1,
        poll_us: int = 0,
    ) -> None:
        self.args = ["--port", str(port), "--path", path, "--count", str(max(1, count))]
        if sources > 1:
            self.args += ["--sources", str(sources)]
        if poll_us > 0:
            self.args += ["--poll-us", str(poll_us)]
        if keys:
            self.args += ["--keys", str(keys)]
        elif want is not None:
            self.args += ["--want", str(want)]
        if ready_on_headers:
            self.args.append("--ready-on-headers")
        self.args += ["--concurrency", str(concurrency), "--open-timeout", f"{open_timeout:g}"]
        self.process: asyncio.subprocess.Process | None = None
        self.opened = 0
        self.failures: list[tuple[int, str]] = []

    async def start(self) -> CClients:
        binary = build()
        self.process = await asyncio.create_subprocess_exec(
            str(binary),
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "start() first"
        return self.process.pid

    async def _send(self, line: str) -> None:
        assert self.process is not None, "start() first"
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def _receive(self) -> str:
        assert self.process is not None, "start() first"
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if not line:
            code = await self.process.wait()
            raise RuntimeError(f"the C load client exited (code {code})")
        text = line.decode().rstrip("\n")
        if text.startswith("error "):
            raise RuntimeError(f"the C load client: {text[6:]}")
        return text

    async def open(self, count: int, first: int = 0, concurrency: int | None = None) -> int:
        """Open streams ``first .. first+count-1``; how many opened (failures printed and kept in ``failures``)."""
        if count <= 0:
            return 0
        command = f"open {first} {count}" + (f" {concurrency}" if concurrency else "")
        await self._send(command)
        while True:
            words = (await self._receive()).split(" ", 2)
            if words[0] == "failed":
                index, reason = int(words[1]), words[2] if len(words) > 2 else ""
                self.failures.append((index, reason))
                print(f"    stream {index} failed to open: {reason}", flush=True)
            elif words[0] == "opened":
                ready = int(words[1])
                self.opened += ready
                return ready

    async def measure(self, on: bool = True) -> None:
        """Count disconnects (from now on, or no longer)."""
        await self._send("measure" if on else "unmeasure")
        await self._receive()

    async def wait(self, seconds: float) -> tuple[int, int, int]:
        """Until every opened stream has all it wants or closed, at most ``seconds``: (complete, closed, pending)."""
        await self._send(f"wait {seconds:.3f}")
        words = (await asyncio.wait_for(self._receive(), seconds + 30)).split()
        assert words[0] == "done", words
        return int(words[1]), int(words[2]), int(words[3])

    async def report(self) -> CReport:
        await self._send("report")
        data = json.loads(await self._receive())
        hist = [0] * BUCKETS
        for bucket, count in data["hist"]:
            hist[bucket] = count
        stats = Stats(
            hist=hist,
            max_ns=data["max_ns"],
            events=data["events"],
            last_ns=data["last_ns"],
            disconnects=data["disconnects"],
            reads=data["reads"],
        )
        return CReport(
            stats=stats,
            opened=data["opened"],
            failed=data["failed"],
            unique=data["sum_unique"],
            duplicates=data["sum_duplicates"],
            want=data["sum_want"],
            complete=data["complete"],
            closed=data["closed"],
            out_of_range=data["out_of_range"],
            cpu_seconds=data["cpu_seconds"],
        )

    async def close(self) -> None:
        """Close every stream and let the child exit (killed if it does not within 10 s)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ConnectionError, OSError):
                assert process.stdin is not None
                process.stdin.write(b"close\n")
                await process.stdin.drain()
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()

    async def __aenter__(self) -> CClients:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
