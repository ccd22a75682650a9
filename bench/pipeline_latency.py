"""Pipeline latency: a raw record's way to a browser through the Spark pipeline in continuous mode.

Starts the embedded broker, the gateway (``runstreams --workers 1``) and ``runpipeline NAME -v 2``
(continuous, one micro-batch every ``trigger_seconds``), all configured from one temporary
``applyconfig`` file: a pipeline from a raw topic to a sink topic, and a route on the sink.
After a warm-up (the first batches of a JVM are slow), one SSE client opens the route and a
producer writes raw JSON records at a steady rate, each carrying its produce time
(``{"seq":N,"ts":<time.time_ns()>,"pad":...}``; the pipeline's SQL keeps ``seq`` and ``ts``
first, so the client reads them as in the other benchmarks). Latency is the client's receipt
time minus the produce time, per record. Prints p50/p90/p99/max, records received against
produced, and where Spark's micro-batches spent their time (``runpipeline -v 2``'s timing lines,
Spark's ``durationMs``). See docs/benchmarks.md.

    python bench/pipeline_latency.py --rate 1000 --seconds 25 --trigger 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.processes import Child, Gateway, producer_main  # noqa: E402
from bench.lib.report import git_commit  # noqa: E402
from bench.lib.sseload import Stats, clients_open, percentile  # noqa: E402
from streams.server.broker import EmbeddedBroker, topic_ensure  # noqa: E402
from streams.server.processes import process_stop  # noqa: E402

ROUTE = "/bench/pipeline"
NAME = "latency"
SCHEMA = {
    "type": "object",
    "required": ["seq", "ts"],
    "properties": {"seq": {"type": "integer"}, "ts": {"type": "integer"}, "pad": {"type": "string"}},
}
# seq and ts first: the client finds them at the start of each event's data (bench/lib/sseload.py).
SQL = "SELECT seq, ts, pad FROM input"
BATCH_LINE = re.compile(r"^batch (\d+): (\d+) in")
BATCH_STARTED = re.compile(r"^batch (\d+): started")
TIMING_LINE = re.compile(r"^batch (\d+) timing: (\d+) ms for (\d+) rows \((.*)\)$")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def config_write(path: Path, *, raw: str, sink: str, trigger: float, checkpoint: Path) -> None:
    """The run's configuration: the sink topic's route and the pipeline (JSON is YAML)."""
    document = {
        "topics": [{"name": sink}],
        "routes": [{"path": ROUTE, "kind": "sse-kafka", "topic": sink, "initial": "live"}],
        "pipelines": [
            {
                "name": NAME,
                "source": {"kafka": raw},
                "json_schema": SCHEMA,
                "sql": SQL,
                "sink": sink,
                "trigger_seconds": int(trigger) if trigger.is_integer() else trigger,
                "checkpoint": str(checkpoint),
            }
        ],
    }
    path.write_text(json.dumps(document, indent=2))


class PipelineProcess:
    """``manage.py runpipeline NAME -v 2`` in its own session; its output kept (and logged) line by line."""

    def __init__(self, env: dict[str, str], master: str, log_path: Path) -> None:
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-u", str(ROOT / "manage.py"), "runpipeline", NAME, "--master", master, "-v", "2"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Spark's JVM is its child: stopped with it, as a group
        )
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
            self.log.write(line)
            self.log.flush()

    def records_in(self) -> int:
        """Records the pipeline has read so far (the sum of its batches' ``in`` counts)."""
        return sum(int(m.group(2)) for _, line in self.lines if (m := BATCH_LINE.match(line)))

    def wait_records(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.records_in() < count:
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(line for _, line in self.lines[-30:])
                raise RuntimeError(f"the pipeline read {self.records_in()} of {count} records:\n{tail}")
            time.sleep(0.2)

    def last_batch(self) -> int:
        """The id of the last batch that said it started (-1: none yet)."""
        return max((int(m.group(1)) for _, line in self.lines if (m := BATCH_STARTED.match(line))), default=-1)

    def timings(self, after_batch: int) -> list[tuple[int, int, dict[str, int]]]:
        """(total ms, rows, parts) of each batch after ``after_batch`` that reported its timing."""
        out = []
        for _, line in self.lines:
            match = TIMING_LINE.match(line)
            if match and int(match.group(1)) > after_batch:
                parts = {name: int(ms) for name, ms in (p.rsplit(" ", 1) for p in match.group(4).split(", ") if p)}
                out.append((int(match.group(2)), int(match.group(3)), parts))
        return out

    def stop(self) -> None:
        try:
            process_stop(self.process, timeout=30)
        finally:
            # Whatever is left of its group (Spark's JVM, Python workers) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.log.close()


def timing_summary(timings: list[tuple[int, int, dict[str, int]]]) -> list[str]:
    """Median (and p90, max) of each part of the batches, in ms."""
    if not timings:
        return ["  no batch timings reported"]
    lines = [f"  {len(timings)} batches, median {statistics.median(t[1] for t in timings):.0f} rows each"]
    names = ["triggerExecution", *sorted({name for _, _, parts in timings for name in parts})]
    for name in names:
        values = sorted(t[0] if name == "triggerExecution" else t[2].get(name, 0) for t in timings)
        p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
        lines.append(f"  {name:17} median {statistics.median(values):7.0f} ms, p90 {p90:7.0f}, max {values[-1]:7.0f}")
    return lines


async def measure(port: int, bootstrap: str, raw: str, partitions: int, rate: float, count: int, size: int) -> dict:
    """One SSE client on the route while ``count`` records are produced at ``rate``; what it received, and when."""
    stats = Stats()
    (client,) = await clients_open(port, 1, stats, count, path_of=lambda _: ROUTE)
    producer = Child(producer_main, bootstrap, raw, partitions, rate, count, size, 1.0)
    await producer.receive(30, "producer ready")
    stats.measuring = True
    producer.conn.send("go")
    produced = await producer.receive(count / rate + 60, "producer result")
    producer.stop()
    # Every record should arrive within a few batches of the last one produced.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(client.done, timeout=60)
    client.close()
    return {
        "stats": stats,
        "received": client.unique,
        "duplicates": client.duplicates,
        "produced": count - produced["failed"],
        "behind": produced["max_behind"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="Records per second produced.")
    # tansu's memory storage slows down as a partition's batches pile up (past some 30,000 one-record
    # batches over 3 partitions a fetch near the end takes seconds): keep the whole run below that.
    parser.add_argument("--seconds", type=float, default=25.0, help="How long the measured run produces.")
    parser.add_argument("--trigger", type=float, default=1.0, help="The pipeline's trigger_seconds.")
    parser.add_argument("--master", default="local[2]", help="Spark master of runpipeline.")
    parser.add_argument("--partitions", type=int, default=3, help="Partitions of the raw and sink topics.")
    parser.add_argument("--size", type=int, default=100, help="Bytes of each raw record.")
    parser.add_argument("--warmup", type=int, default=3000, help="Records the pipeline reads before measuring.")
    args = parser.parse_args()
    count = int(args.rate * args.seconds)
    print(f"load average at start: {load_average()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so every process is stopped
    tmp = Path(tempfile.mkdtemp(prefix="sluice-pipeline-latency-"))
    broker = EmbeddedBroker().start()
    gateway: Gateway | None = None
    pipeline: PipelineProcess | None = None
    try:
        raw, sink = f"latency-raw-{uuid.uuid4().hex[:8]}", f"latency-sink-{uuid.uuid4().hex[:8]}"
        for topic in (raw, sink):
            topic_ensure(broker.bootstrap, topic, args.partitions)
        gateway = Gateway(f"sqlite:///{tmp}/db.sqlite3", broker.bootstrap, tmp / "gateway.log", workers=1)
        gateway.manage("migrate", "--verbosity", "0")
        config_write(tmp / "config.yaml", raw=raw, sink=sink, trigger=args.trigger, checkpoint=tmp / "checkpoint")
        gateway.manage("applyconfig", str(tmp / "config.yaml"))
        gateway.start()
        pipeline = PipelineProcess(gateway.env, args.master, tmp / "pipeline.log")
        start = time.monotonic()
        # Warm-up: the first batches of a JVM pay for class loading, code generation and Python workers.
        warm = Child(producer_main, broker.bootstrap, raw, args.partitions, args.rate, args.warmup, args.size, 1.0)
        asyncio.run(warm.receive(60, "warm-up producer ready"))
        warm.conn.send("go")
        asyncio.run(warm.receive(args.warmup / args.rate + 60, "warm-up producer result"))
        warm.stop()
        pipeline.wait_records(args.warmup, timeout=300)
        print(f"pipeline warm after {time.monotonic() - start:.0f} s; load average {load_average()}", flush=True)
        warm_batches = pipeline.last_batch()
        result = asyncio.run(measure(gateway.port, broker.bootstrap, raw, args.partitions, args.rate, count, args.size))
        load_end = load_average()
        stats: Stats = result["stats"]
        timings = pipeline.timings(warm_batches)
        exited = pipeline.process.poll()
        if exited is not None:
            errors = [line for _, line in pipeline.lines if "Error" in line or "error" in line]
            print(f"the pipeline exited with status {exited} during the run: {errors[-1] if errors else ''}")
    finally:
        if pipeline is not None:
            pipeline.stop()
        if gateway is not None:
            gateway.stop()
        broker.stop()
    events = stats.events
    marks = {f: percentile(stats.hist, events, f) / 1000 for f in (0.5, 0.9, 0.99)} if events else {}
    print(
        f"\npython bench/pipeline_latency.py {' '.join(sys.argv[1:])}\n"
        f"commit {git_commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average at end {load_end}\n"
        f"trigger {args.trigger} s, master {args.master}, {args.partitions} partitions, {args.rate:.0f} records/s"
        f" for {args.seconds:.0f} s ({args.size} bytes each), producer at most {result['behind'] * 1000:.0f} ms behind"
    )
    if marks:
        print(
            f"latency raw produce -> SSE receipt: p50 {marks[0.5]:.2f} s, p90 {marks[0.9]:.2f} s,"
            f" p99 {marks[0.99]:.2f} s, max {stats.max_ns / 1e9:.2f} s"
        )
    print(f"received {result['received']:,} of {result['produced']:,} produced ({result['duplicates']} duplicates)")
    print("micro-batches while measuring (Spark's durationMs):")
    print("\n".join(timing_summary(timings)))
    print(f"logs in {tmp}")


if __name__ == "__main__":
    main()
