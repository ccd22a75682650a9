"""Producing rows to Kafka from Spark tasks, on confluent-kafka: the ``sluice-kafka`` writer, a micro-batch's tasks.

``df.write.format("sluice-kafka")`` produces the ``value``, ``key`` and ``headers`` columns to the
``topic`` option's topic, or to each row's ``topic`` column (:class:`KafkaWriter`). A pipeline's
micro-batch does not go through the writer: its tasks produce with :func:`batches_produce_counted`
(``mapInArrow``). Either way a task fails unless the broker acknowledged every record it was given.

No Django import here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .kafka_options import FLUSH_TIMEOUT_OPTION, kafka_properties, options_lowered
from .spark_worker import zip_invalidation_lazy

zip_invalidation_lazy()  # this module loads in Spark's Python workers: see pipeline.spark_worker

# What each task of :func:`batches_produce_counted` returns: how many records it produced.
PRODUCED_COUNT_SCHEMA = "records bigint"
_COUNT_ARROW_SCHEMA = pa.schema([("records", pa.int64())])


class KafkaWriteError(RuntimeError):
    """Records the broker did not acknowledge, or rows with no topic to go to."""


@dataclass
class ProducedCount(WriterCommitMessage):
    records: int


def _delivery_check(failures: list[str]) -> Callable[[KafkaError | None, Message], None]:
    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{message.topic()}: {error}")

    return report


def producer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings of a task's producer: batches of up to 10,000, the ``kafka.*`` options on top."""
    config: dict[str, Any] = {
        "bootstrap.servers": options["bootstrap"],
        "linger.ms": 20,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 200_000,
        "log_level": 0,
    }
    config.update(kafka_properties(options))
    return config


def batches_produce(options: Mapping[str, str], batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches`` and wait for the acks; how many.

    Columns: ``value``, optional ``key`` and ``headers``, and ``topic`` unless the ``topic`` option names
    one topic for all rows (as Spark's own Kafka sink does); other columns are ignored.
    """
    options = options_lowered(options)
    topic = options.get("topic")
    producer: Producer | None = None  # made for the first row: a task with none to produce connects to nothing
    failures: list[str] = []
    report = _delivery_check(failures)
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        if producer is None:
            producer = Producer(producer_config(options))
        keys = batch.column("key").to_pylist() if "key" in batch.schema.names else [None] * batch.num_rows
        values = batch.column("value").to_pylist()
        headers = batch.column("headers").to_pylist() if "headers" in batch.schema.names else [None] * batch.num_rows
        if topic is None and "topic" not in batch.schema.names:
            raise KafkaWriteError("give the topic option or a topic column")
        topics = [topic] * batch.num_rows if topic is not None else batch.column("topic").to_pylist()
        for to, key, value, header_list in zip(topics, keys, values, headers, strict=True):
            items = [(h["key"], h["value"]) for h in header_list] if header_list else None
            while True:
                try:
                    producer.produce(to, value=value, key=key, headers=items, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    if producer is None:
        return 0
    remaining = producer.flush(float(options.get(FLUSH_TIMEOUT_OPTION, "60")))
    if remaining or failures:
        raise KafkaWriteError(f"{remaining} records not acknowledged; errors: {failures[:3]}")
    return count


def batches_produce_counted(options: Mapping[str, str], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """:func:`batches_produce` as a ``mapInArrow`` function: produces the task's rows, yields one row, their count.

    Inside a micro-batch this is cheaper than ``df.write.format("sluice-kafka")``, whose writer
    is made and committed by Spark in Python planner processes on every write.
    """
    yield pa.RecordBatch.from_pydict({"records": [batches_produce(options, batches)]}, schema=_COUNT_ARROW_SCHEMA)


class KafkaWriter(DataSourceArrowWriter):
    """Batch writes; a task fails unless the broker acknowledged all of its records."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options_lowered(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return ProducedCount(batches_produce(self.options, iterator))
