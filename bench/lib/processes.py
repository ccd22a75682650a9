"""Starting and stopping what a benchmark measures: a Sluice gateway, helper processes, the producer and the probe."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.lib.paths import ROOT
from bench.lib.procstats import process_tree, self_cpu_seconds
from streams.server.processes import process_stop


def payload_make(seq: int, ts: int, size: int, team: bytes = b"") -> bytes:
    """``{"seq":N,"ts":T,"pad":"x..."}`` of ``size`` bytes; with ``team``, ``"team":"<team>"`` before the pad."""
    head = (
        b'{"seq":%d,"ts":%d,"team":"%s","pad":"' % (seq, ts, team) if team else b'{"seq":%d,"ts":%d,"pad":"' % (seq, ts)
    )
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


# The payload as an Avro record: decoded to JSON, it is ``payload_make``'s text again.
PAYLOAD_AVRO = {
    "type": "record",
    "name": "Payload",
    "fields": [{"name": "seq", "type": "long"}, {"name": "ts", "type": "long"}, {"name": "pad", "type": "string"}],
}


def avro_payload_encoder(registry: str, topic: str) -> Any:
    """``encode(seq, ts, size)``: the payload as confluent-kafka's AvroSerializer writes it (Confluent wire format)."""
    import io
    import json

    import fastavro
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(PAYLOAD_AVRO))
    context = SerializationContext(topic, MessageField.VALUE)
    # The serializer registers the schema and writes the header; the body is fastavro's, as in the
    # serializer, written here directly so the producer keeps up at the peak rates.
    header = bytes(serialize({"seq": 0, "ts": 0, "pad": ""}, context))[:5]
    schema = fastavro.parse_schema(PAYLOAD_AVRO)

    def encode(seq: int, ts: int, size: int) -> bytes:
        head = b'{"seq":%d,"ts":%d,"pad":"' % (seq, ts)
        out = io.BytesIO()
        out.write(header)
        fastavro.schemaless_writer(out, schema, {"seq": seq, "ts": ts, "pad": "x" * max(0, size - len(head) - 2)})
        return out.getvalue()

    return encode


def producer_main(
    conn: Any,
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: float,
    count: int,
    size: int,
    linger_ms: float,
    keys: int = 0,
    registry: str = "",
    team: bool = False,
    random_keys: bool = False,
    placed: bool = False,
) -> None:
    """Publish ``count`` messages at ``rate``/s, round-robin over partitions, once told to go.

    With ``placed``, keyless messages are not given a partition: librdkafka's partitioner places
    them, as it does for a keyless application (sticky: a batch's worth to one partition, then the next).

    With ``keys``, message n has key ``k<n % keys>`` (bench/compare.py's key-filter scenario), and
    with ``team`` the same text in its value's ``team`` field (bench/value_filters.py's value filters);
    with ``random_keys`` too, a key drawn uniformly from ``k0 .. k<keys-1>`` (seeded), each key on one
    partition as Kafka's partitioner keeps it (bench/ticker.py); with ``registry``, payloads are Avro in
    Confluent's wire format, their schema registered there.
    """
    import random

    from confluent_kafka import Producer

    payload = avro_payload_encoder(registry, topic) if registry else payload_make

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "log_level": 0})
    producer.list_topics(topic, timeout=10)
    failed = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    conn.send("ready")
    if conn.recv() != "go":
        return
    cpu0 = self_cpu_seconds()
    start = time.perf_counter()
    behind = 0.0
    draw = random.Random(31).randrange if random_keys and keys else None  # the same keys in every run
    for seq in range(count):
        target = start + seq / rate
        delay = target - time.perf_counter()
        if delay > 0:
            # Not producer.poll(delay): it rounds to whole milliseconds and spins below one.
            time.sleep(delay)
        behind = max(behind, -delay)
        index = draw(keys) if draw is not None else seq % keys if keys else seq
        while True:
            try:
                key = b"k%d" % index if keys else None
                partition = index % partitions if draw is not None else seq % partitions
                where = {} if placed and key is None else {"partition": partition}
                producer.produce(
                    topic,
                    payload(seq, time.time_ns(), size, key) if team and key else payload(seq, time.time_ns(), size),
                    key=key,
                    on_delivery=delivered,
                    **where,
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    produced_in = time.perf_counter() - start
    unflushed = producer.flush(30)
    conn.send(
        {
            "seconds": produced_in,
            "failed": failed + unflushed,
            "cpu": self_cpu_seconds() - cpu0,
            "max_behind": behind,
        }
    )


def bare_consumer(bootstrap: str, topic: str, partitions: int, wait_ms: int, start: int) -> Any:
    """A plain confluent-kafka consumer of ``topic``'s partitions from ``start`` (-1: the end); joins no group."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "fetch.wait.max.ms": wait_ms,
            "enable.partition.eof": False,
            "enable.auto.commit": False,  # assigned, never committed: the broker sees fetches only
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    return consumer


def probe_main(conn: Any, bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """A bare Kafka consumer with the gateway's fetch settings: the latency of the broker path alone."""
    from streams.fanout.pacing import HOLDING_WAIT_MS

    # The gateway's fetch wait on the embedded broker.
    consumer = bare_consumer(bootstrap, topic, partitions, HOLDING_WAIT_MS, start=0)
    latencies: list[int] = []
    conn.send("ready")
    cpu0 = self_cpu_seconds()
    while len(latencies) < count and not conn.poll():
        # One blocking wait, then whatever is queued: no batch timeout added to the latency.
        messages = consumer.consume(1, 0.1)
        if not messages:
            continue
        messages += consumer.consume(1000, 0)
        now = time.time_ns()
        for message in messages:
            value = message.value()
            if message.error() is None and value:
                comma = value.index(b",")
                latencies.append(now - int(value[comma + 6 : value.index(b",", comma + 6)]))
    cpu = self_cpu_seconds() - cpu0
    consumer.close()
    latencies.sort()
    pick = (
        (lambda f: latencies[min(len(latencies) - 1, int(len(latencies) * f))] / 1e6) if latencies else (lambda f: 0.0)
    )
    conn.send({"count": len(latencies), "p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0), "cpu": cpu})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """``manage.py runstreams --port 0`` on the benchmark's database and broker; output to a log file."""

    def __init__(
        self, database_url: str, bootstrap: str, log_path: Path, workers: int = 1, server: str = "daphne"
    ) -> None:
        self.workers = workers
        self.server = server
        self.env = dict(os.environ)
        self.env.update(
            {
                "DATABASE_URL": database_url,
                "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                "SLUICE_DEV": "1",
                # Every load client is on loopback.
                "SLUICE_MAX_STREAMS_PER_ADDRESS": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def command(self) -> list[str]:
        if self.server == "uvicorn":
            # The same ASGI application under uvicorn (uvloop, httptools), one process per worker.
            self.port = free_port()
            return [
                *(sys.executable, "-m", "uvicorn", "project.asgi:application"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)),
                *("--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning"),
                *("--backlog", "4096", "--timeout-graceful-shutdown", "5"),
            ]
        return [
            *(sys.executable, "-u", str(ROOT / "manage.py"), "runstreams"),
            *("--port", "0", "--workers", str(self.workers)),
        ]

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child keeps writing to it
        self.process = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server == "uvicorn":
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            else:
                text = self.log_path.read_text("utf-8", "replace")
                found = re.search(r"listening on http://[^/\s]+:(\d+)/", text)
                if found:
                    self.port = int(found.group(1))
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("gateway did not start:\n" + self.log_path.read_text("utf-8", "replace"))

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def pids(self) -> list[int]:
        """The serving processes: runstreams itself, plus its workers with ``--workers``."""
        return process_tree(self.pid)

    def stop(self) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=15)
        self.process = None


class Child:
    """A helper process (producer or probe) and our end of its pipe."""

    def __init__(self, target: Any, *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=target, args=(child, *args), daemon=True)
        self.process.start()

    async def receive(self, seconds: float, what: str) -> Any:
        deadline = time.monotonic() + seconds
        while not self.conn.poll():
            if time.monotonic() > deadline or (not self.process.is_alive() and not self.conn.poll()):
                raise RuntimeError(f"{what}: no answer from the helper process")
            await asyncio.sleep(0.02)
        return self.conn.recv()

    def stop(self) -> None:
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
