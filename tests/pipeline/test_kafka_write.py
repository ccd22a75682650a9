"""Producing from Spark tasks: a micro-batch's write, acknowledgements, options."""

from __future__ import annotations

import functools
import time
from typing import Any

import pyarrow as pa
import pytest

from pipeline.kafka_write import PRODUCED_COUNT_SCHEMA, KafkaWriteError, batches_produce, batches_produce_counted
from tests.support.pipeline_records import topic_read

ROWS = "key binary, value binary, headers array<struct<key: string, value: binary>>, topic string"


@pytest.mark.slow
def test_tasks_produce_each_rows_topic_and_count_them(spark: Any, kafka: Any) -> None:
    """What a micro-batch writes with: ``mapInArrow`` over the rows, one count per task, all acknowledged."""
    first, second = kafka.topic(), kafka.topic()
    df = spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), None, first if i % 2 else second) for i in range(40)], ROWS
    ).repartition(3)
    produce = functools.partial(batches_produce_counted, {"bootstrap": kafka.bootstrap})
    counts = [row.records for row in df.mapInArrow(produce, PRODUCED_COUNT_SCHEMA).collect()]
    assert sum(counts) == 40
    assert len(counts) == 3
    assert sorted(r.value for r in topic_read(kafka.bootstrap, first)) == sorted(
        f"v{i}".encode() for i in range(1, 40, 2)
    )
    assert len(topic_read(kafka.bootstrap, second)) == 20


def test_a_task_fails_when_its_records_are_not_acknowledged_within_flush_timeout_seconds() -> None:
    """The option is read whatever its case (Spark hands ``flushTimeoutSeconds`` over as ``flushtimeoutseconds``)."""
    batch = pa.RecordBatch.from_pydict({"value": [b"v"], "topic": ["nowhere"]})
    for name in ("flushTimeoutSeconds", "flushtimeoutseconds"):
        started = time.monotonic()
        with pytest.raises(KafkaWriteError, match="1 records not acknowledged"):
            batches_produce({"bootstrap": "127.0.0.1:1", name: "1"}, iter([batch]))
        assert time.monotonic() - started < 10


def test_nothing_to_produce_connects_to_nothing() -> None:
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary()), "topic": pa.array([], pa.string())})
    assert batches_produce({"bootstrap": "127.0.0.1:1", "flushtimeoutseconds": "1"}, iter([empty])) == 0
