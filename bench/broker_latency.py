"""The broker path alone: produce-to-consume latency of a bare confluent-kafka consumer on the embedded broker.

A producer (``linger.ms`` 1) sends a timestamp 100 times a second over 3 partitions
for 8 s; a consumer with the given ``fetch.wait.max.ms`` polls record by record. What
Sluice's latency has on top of these numbers is its own share.

    python bench/broker_latency.py 1 2 5 100      # one line per fetch wait (ms)
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer

from bench.lib.processes import bare_consumer
from streams.server.broker import EmbeddedBroker, topic_ensure


def measure(bootstrap: str, topic: str, wait_ms: int, seconds: float = 8.0) -> list[float]:
    consumer = bare_consumer(bootstrap, topic, 3, wait_ms, start=-1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "log_level": 0})
    stop = time.time() + seconds

    def produce() -> None:
        n = 0
        while time.time() < stop:
            producer.produce(topic, str(time.time_ns()).encode(), partition=n % 3)
            producer.poll(0)
            n += 1
            time.sleep(0.01)
        producer.flush()

    thread = threading.Thread(target=produce)
    thread.start()
    latencies: list[float] = []
    while thread.is_alive() or time.time() < stop + 1:
        message = consumer.poll(0.1)
        if message is None or message.error() or message.value() is None:
            continue
        latencies.append((time.time_ns() - int(message.value())) / 1e6)
    consumer.close()
    return sorted(latencies[50:])  # the first records include the consumer's start


def main() -> None:
    waits = [int(arg) for arg in sys.argv[1:]] or [2]
    broker = EmbeddedBroker().start()
    try:
        topic_ensure(broker.bootstrap, "broker-latency", partitions=3)
        for wait in waits:
            found = measure(broker.bootstrap, "broker-latency", wait)
            p50, p99 = found[len(found) // 2], found[int(len(found) * 0.99)]
            print(f"fetch.wait.max.ms {wait}: {len(found)} records, p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
