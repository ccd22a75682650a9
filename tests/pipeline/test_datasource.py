"""The ``sluice-kafka`` Spark data source on the real broker: columns, partitions, stream offsets, writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from pipeline.datasource import FORMAT_NAME
from pipeline.models import PipelineRun
from pipeline.services import pipeline_upsert
from tests.support.pipeline_records import SCORE_SCHEMA, topic_read

pytestmark = pytest.mark.slow


def reader(spark: Any, kafka: Any, topic: str) -> Any:
    return spark.read.format(FORMAT_NAME).option("bootstrap", kafka.bootstrap).option("topic", topic).load()


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
        stream = spark.readStream.format(FORMAT_NAME).option("bootstrap", kafka.bootstrap).option("topic", topic)
        query = (
            stream.load()
            .writeStream.foreachBatch(lambda batch, _: seen.extend((r.partition, r.offset) for r in batch.collect()))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)

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
