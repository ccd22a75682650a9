"""``sluice_threads`` counts the threads librdkafka starts, which Python does not see."""

from __future__ import annotations

import threading

from confluent_kafka import Producer
from prometheus_client.core import Metric

from streams.ops.metrics import ProcessCollector


def _gauge(metrics: list[Metric], name: str) -> float:
    (family,) = [m for m in metrics if m.name == name]
    return family.samples[0].value


def test_threads_include_librdkafkas() -> None:
    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 1000})
    try:
        threads = _gauge(list(ProcessCollector().collect()), "sluice_threads")
        assert threads > threading.active_count()  # librdkafka's main and broker threads are OS threads only
    finally:
        producer.flush(0)
        del producer
