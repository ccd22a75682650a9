"""Producing from Spark tasks: a micro-batch's write and count by rule in one job, acknowledgements, options."""

from __future__ import annotations

import functools
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from pipeline.kafka_write import TALLY_SCHEMA, KafkaWriteError, batches_produce, batches_produce_tallied, batches_tally
from tests.support.pipeline_records import topic_read

ROWS = "key binary, value binary, headers array<struct<key: string, value: binary>>, topic string"


def test_tally_counts_the_counted_rows_by_rule_and_passes_on_the_ones_with_a_topic() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": [b"sink", b"letter", None, b"letter", None, b"sink"],
            "topic": ["sink", "dead", None, "dead", None, "sink"],
            "_rule": [None, "required:/a", None, "type:/b", "json:/", None],
            "_counted": [False, True, True, True, True, False],
        }
    )
    tally: Counter[str | None] = Counter()
    (passed,) = batches_tally(iter([batch]), tally, rule="_rule", counted="_counted")
    assert passed.column("value").to_pylist() == [b"sink", b"letter", b"letter", b"sink"]
    assert tally == {None: 1, "required:/a": 1, "type:/b": 1, "json:/": 1}


@pytest.mark.slow
def test_tasks_produce_the_rows_with_a_topic_and_count_the_batchs_records_by_rule(spark: Any, kafka: Any) -> None:
    """What a micro-batch writes with: ``mapInArrow`` over the rows, one job, every record acknowledged and counted."""
    sink, dead = kafka.topic(), kafka.topic()
    # The SQL's output to the sink, then the batch's records: valid ones, invalid ones with a topic or not.
    rows: list[tuple[Any, ...]] = [(f"k{i}".encode(), f"v{i}".encode(), None, sink, None, False) for i in range(30)]
    rows += [(None, None, None, None, None, True) for _ in range(25)]
    rows += [(b"x", f"bad{i}".encode(), None, dead, "required:/a" if i % 3 else "json:/", True) for i in range(9)]
    rows += [(None, None, None, None, "type:/b", True)]
    df = spark.createDataFrame(rows, f"{ROWS}, _rule string, _counted boolean").repartition(3)
    produce = functools.partial(
        batches_produce_tallied, {"bootstrap": kafka.bootstrap}, rule="_rule", counted="_counted"
    )
    counts: Counter[str | None] = Counter()
    for row in df.mapInArrow(produce, TALLY_SCHEMA).collect():
        counts[row.rule] += row.records
    assert counts == {None: 25, "required:/a": 6, "json:/": 3, "type:/b": 1}
    assert sorted(r.value for r in topic_read(kafka.bootstrap, sink)) == sorted(f"v{i}".encode() for i in range(30))
    assert sorted(r.value for r in topic_read(kafka.bootstrap, dead)) == sorted(f"bad{i}".encode() for i in range(9))


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
