"""The ``sluice-kafka`` Spark data source on the real broker: columns, partitions, stream offsets, writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer
from django.core.management import CommandError, call_command

from pipeline.datasource import (
    FORMAT_NAME,
    KafkaReadError,
    KafkaStreamReader,
    PartitionRange,
    partition_ends,
    partition_read,
    ranges_group,
    reader_config,
)
from pipeline.models import PipelineRun
from pipeline.services import pipeline_upsert
from tests.support.pipeline_records import SCORE_SCHEMA, topic_read

pytestmark = pytest.mark.slow


def reader(spark: Any, kafka: Any, topic: str) -> Any:
    return spark.read.format(FORMAT_NAME).option("bootstrap", kafka.bootstrap).option("topic", topic).load()


def stream_drain(
    spark: Any, kafka: Any, topic: str, checkpoint: Path, on_row: Callable[[Any], object], **options: str
) -> None:
    """Stream ``topic`` from ``checkpoint`` until it has read what is there (``availableNow``): ``on_row`` per row."""

    def each_batch(batch: Any, _epoch: int) -> None:
        for row in batch.collect():
            on_row(row)

    stream = spark.readStream.format(FORMAT_NAME).option("bootstrap", kafka.bootstrap).option("topic", topic)
    for name, value in options.items():
        stream = stream.option(name, value)
    query = (
        stream.load()
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)


def test_batch_read_has_one_spark_partition_per_kafka_partition(spark: Any, kafka: Any) -> None:
    topic = kafka.topic(partitions=3)
    for i in range(30):
        kafka.produce(topic, f"v{i}", key=f"k{i}", partition=i % 3, headers={"h": str(i)}, flush=False)
    kafka.flush()
    df = reader(spark, kafka, topic)
    assert df.columns == ["key", "value", "headers", "topic", "partition", "offset", "timestamp"]
    assert df.rdd.getNumPartitions() == 3
    rows = df.collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted((i % 3, i // 3) for i in range(30))
    row = next(r for r in rows if r.key == b"k7")
    assert (row.value, row.topic, row.headers[0].key, row.headers[0].value) == (b"v7", topic, "h", b"7")
    assert row.timestamp is not None


def test_stream_resumes_from_checkpointed_offsets(spark: Any, kafka: Any, tmp_path: Path) -> None:
    topic = kafka.topic(partitions=2)
    seen: list[tuple[int, int]] = []

    def run() -> None:
        stream_drain(spark, kafka, topic, tmp_path / "checkpoint", lambda r: seen.append((r.partition, r.offset)))

    for i in range(10):
        kafka.produce(topic, f"a{i}", partition=i % 2, flush=False)
    kafka.flush()
    run()
    assert len(seen) == 10
    for i in range(6):
        kafka.produce(topic, f"b{i}", partition=i % 2, flush=False)
    kafka.flush()
    run()
    assert sorted(seen) == sorted(
        [(p, o) for p in range(2) for o in range(5)] + [(p, o) for p in range(2) for o in range(5, 8)]
    )


def test_stream_starting_offsets_latest_reads_only_what_comes_after_its_start(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    """``startingOffsets`` as written in Spark code (Spark hands it to the source as ``startingoffsets``)."""
    topic = kafka.topic(partitions=2)
    seen: list[bytes] = []

    def run() -> None:
        checkpoint = tmp_path / "checkpoint"
        stream_drain(spark, kafka, topic, checkpoint, lambda r: seen.append(r.value), startingOffsets="latest")

    for i in range(10):
        kafka.produce(topic, f"before{i}", partition=i % 2, flush=False)
    kafka.flush()
    run()
    assert seen == []
    for i in range(4):
        kafka.produce(topic, f"after{i}", partition=i % 2, flush=False)
    kafka.flush()
    run()
    assert sorted(seen) == sorted(f"after{i}".encode() for i in range(4))


def test_a_read_fails_when_records_stop_coming_for_read_timeout_seconds(kafka: Any) -> None:
    topic = kafka.topic()
    for i in range(5):
        kafka.produce(topic, f"v{i}", partition=0, flush=False)
    kafka.flush()
    for name in ("readTimeoutSeconds", "readtimeoutseconds"):
        options = {"bootstrap": kafka.bootstrap, name: "1"}
        with pytest.raises(KafkaReadError, match=r"stopped at offset 5 before 10 \(1.0s\)"):
            list(partition_read(options, PartitionRange(topic, 0, 0, 10)))


def test_writer_produces_key_value_and_headers(spark: Any, kafka: Any) -> None:
    topic = kafka.topic(partitions=2)
    df = spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())]) for i in range(50)],
        "key binary, value binary, headers array<struct<key: string, value: binary>>",
    )
    df.write.format(FORMAT_NAME).mode("append").option("bootstrap", kafka.bootstrap).option("topic", topic).save()
    records = topic_read(kafka.bootstrap, topic)
    assert sorted((r.key, r.value, r.headers["n"]) for r in records) == sorted(
        (f"k{i}".encode(), f"v{i}".encode(), str(i).encode()) for i in range(50)
    )


@pytest.mark.django_db(transaction=True)
def test_spark_kafka_format_without_its_connector_is_a_command_error(
    spark: Any, pipeline_kafka: Any, tmp_path: Path
) -> None:
    pipeline_upsert(
        name="spark-kafka",
        source_topic=pipeline_kafka.topic(),
        json_schema=SCORE_SCHEMA,
        sink_topic=pipeline_kafka.topic(),
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    with pytest.raises(CommandError, match=r"could not start.*kafka"):
        call_command("runpipeline", "spark-kafka", "--once", "--kafka-format", "kafka")
    assert PipelineRun.objects.get().status == "failed"


def test_writer_takes_each_rows_topic_without_the_option(spark: Any, kafka: Any) -> None:
    first, second = kafka.topic(), kafka.topic()
    df = spark.createDataFrame(
        [(f"v{i}".encode(), first if i % 2 else second) for i in range(10)], "value binary, topic string"
    )
    df.write.format(FORMAT_NAME).mode("append").option("bootstrap", kafka.bootstrap).save()
    assert sorted(r.value for r in topic_read(kafka.bootstrap, first)) == [f"v{i}".encode() for i in (1, 3, 5, 7, 9)]
    assert sorted(r.value for r in topic_read(kafka.bootstrap, second)) == [f"v{i}".encode() for i in (0, 2, 4, 6, 8)]


def test_ranges_group_fills_each_task_up_to_the_minimum() -> None:
    ranges = [PartitionRange("t", p, 100, 100 + size) for p, size in enumerate([10, 20, 30, 500, 5])]
    groups = ranges_group(ranges, 50)
    assert [[r.partition for r in g.ranges] for g in groups] == [[0, 1, 2], [3], [4]]
    assert [[r.partition for r in g.ranges] for g in ranges_group(ranges, 1)] == [[0], [1], [2], [3], [4]]
    assert ranges_group([], 50) == []


def test_stream_reads_a_small_batch_of_several_partitions_in_one_task(kafka: Any) -> None:
    topic = kafka.topic(partitions=3)
    for i in range(30):
        kafka.produce(topic, f"v{i}", partition=i % 3, flush=False)
    kafka.flush()
    reader = KafkaStreamReader({"bootstrap": kafka.bootstrap, "topic": topic})
    try:
        start, end = reader.initialOffset(), reader.latestOffset()
        assert end["partitions"] == {"0": 10, "1": 10, "2": 10}
        (task,) = reader.partitions(start, end)
        rows = pa.Table.from_batches(list(reader.read(task))).to_pylist()
        assert sorted((r["partition"], r["offset"]) for r in rows) == sorted((i % 3, i // 3) for i in range(30))
        # Past the minimum, a task per partition again (the option's name in either case).
        for name in ("minRecordsPerTask", "minrecordspertask"):
            big = KafkaStreamReader({"bootstrap": kafka.bootstrap, "topic": topic, name: "10"})
            assert len(big.partitions(start, end)) == 3
            big.stop()
    finally:
        reader.stop()


def test_partition_ends_are_found_while_records_keep_arriving(kafka: Any) -> None:
    """The end is read from the last batch, not waited for as an end of partition that keeps moving away."""
    topic = kafka.topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 1, "log_level": 0})
    produced = [0, 0]
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(topic, b"x" * 50, partition=n % 2)
            producer.poll(0)
            n += 1
            if n % 20 == 0:
                producer.flush(10)
                produced[:] = [(n + 1) // 2, n // 2]
                stop.wait(0.005)
        producer.flush(10)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    consumer = Consumer(reader_config({"bootstrap": kafka.bootstrap}))
    try:
        while sum(produced) < 200:
            stop.wait(0.01)
        for _ in range(5):
            before = list(produced)
            ends = partition_ends(consumer, topic, [0, 1])
            after = list(produced)
            # Every record acknowledged before the call is below its end; none beyond what was written.
            assert all(before[p] <= ends[p] for p in (0, 1)), (before, ends)
            assert all(ends[p] <= after[p] + 20 for p in (0, 1)), (after, ends)
    finally:
        stop.set()
        writer.join(30)
        consumer.close()
