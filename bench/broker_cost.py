"""The embedded broker's own CPU while one consumer reads what a producer writes, over time.

A producer writes ``--rate`` 200-byte records a second over 3 partitions (``linger.ms``
``--linger-ms``) into a fresh embedded broker for ``--seconds``; a bare confluent-kafka
consumer with each ``fetch.wait.max.ms`` given (0: no consumer) reads them from the
start. Prints the broker process's CPU (% of one core) in every 5 s window, one line
per fetch wait. The gateway's per-user scenario runs at 10,000 msg/s::

    python bench/broker_cost.py --rate 10000 --seconds 30 0 10 20

Nothing of Sluice runs: this is what the broker costs beside it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer

from bench.lib.processes import bare_consumer
from bench.lib.procstats import proc_cpu_seconds
from streams.server.broker import EmbeddedBroker, topic_ensure

PARTITIONS = 3
WINDOW_SECONDS = 5.0
PAYLOAD = b"x" * 200


def consume(bootstrap: str, topic: str, wait_ms: int, stop: threading.Event, counted: list[int]) -> None:
    consumer = bare_consumer(bootstrap, topic, PARTITIONS, wait_ms, start=0)
    while not stop.is_set():
        counted[0] += len(consumer.consume(1000, 0.1))
    consumer.close()


def measure(wait_ms: int, rate: int, seconds: float, linger_ms: float) -> tuple[list[float], int, int]:
    """Broker CPU per window, records produced, records consumed."""
    broker = EmbeddedBroker().start()
    assert broker.process is not None
    try:
        topic = "cost"
        topic_ensure(broker.bootstrap, topic, partitions=PARTITIONS)
        stop = threading.Event()
        counted = [0]
        reader = threading.Thread(target=consume, args=(broker.bootstrap, topic, wait_ms, stop, counted))
        if wait_ms:
            reader.start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": linger_ms, "log_level": 0})
        time.sleep(1.0)  # the consumer's start
        started = time.monotonic()
        window_cpu, window_start = proc_cpu_seconds(broker.process.pid), started
        windows: list[float] = []
        produced = 0
        while (now := time.monotonic()) - started < seconds:
            due = int((now - started) * rate)
            while produced < due:
                producer.produce(topic, PAYLOAD, partition=produced % PARTITIONS)
                produced += 1
            producer.poll(0)
            time.sleep(0.001)
            if now - window_start >= WINDOW_SECONDS:
                used = proc_cpu_seconds(broker.process.pid)
                windows.append(100 * (used - window_cpu) / (now - window_start))
                window_cpu, window_start = used, now
        producer.flush()
        time.sleep(0.5)
        stop.set()
        if wait_ms:
            reader.join()
        return windows, produced, counted[0]
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("waits", nargs="+", type=int, help="fetch.wait.max.ms of the consumer (0: none)")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--linger-ms", type=float, default=5.0)
    args = parser.parse_args()
    for wait_ms in args.waits:
        windows, produced, consumed = measure(wait_ms, args.rate, args.seconds, args.linger_ms)
        who = f"a consumer with fetch.wait.max.ms {wait_ms}" if wait_ms else "no consumer"
        shown = " ".join(f"{cpu:.0f} %" for cpu in windows)
        print(f"{who}: broker CPU per {WINDOW_SECONDS:.0f} s: {shown} ({produced} produced, {consumed} consumed)")


if __name__ == "__main__":
    main()
