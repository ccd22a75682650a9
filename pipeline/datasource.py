"""Kafka for Spark through the Python data source API (Spark 4), on confluent-kafka.

``spark.read.format("sluice-kafka")`` and ``spark.readStream.format("sluice-kafka")`` give
one input partition per Kafka partition with the columns of :data:`KAFKA_SCHEMA`; the stream
keeps its per-partition offsets in the query's checkpoint. ``df.write.format("sluice-kafka")``
produces rows to Kafka (:mod:`pipeline.kafka_write`). Option names are read in lower case, as
Spark hands them over (:mod:`pipeline.kafka_options`).

Reads decode values by the ``value.format`` option (the source topic's format, see
:mod:`pipeline.value_decoding`): the ``value`` column then holds each record's JSON text.

No Django import here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from streams.fanout.kafka_config import ConsumerDefaults, consumer_config

from .kafka_options import (
    MIN_RECORDS_PER_TASK_OPTION,
    READ_TIMEOUT_OPTION,
    STARTING_OFFSETS_OPTION,
    kafka_properties,
    options_lowered,
)
from .kafka_write import KafkaWriter
from .value_decoding import ValueDecoding, value_formats

FORMAT_NAME = "sluice-kafka"
KAFKA_SCHEMA = (
    "key binary, value binary, headers array<struct<key: string, value: binary>>,"
    " topic string, partition int, offset bigint, timestamp timestamp"
)
_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
_ARROW_BATCH_ROWS = 20_000
# fetch.wait.max.ms of every consumer here. A read stops at an offset it knows exists and the end of a
# partition is found by fetching its last batch, so a waiting fetch is never needed; and tansu, the
# embedded broker, holds one for the whole wait even when records arrive, which delays the next fetch
# of a reused consumer (the stream's planning one) by as much.
FETCH_WAIT_MS = 10
# A micro-batch's partitions share Spark tasks until each task has this many records: a task costs
# far more than reading a few thousand records, so a small batch is one task, a large one a task per
# Kafka partition (the stream's ``minRecordsPerTask`` option).
MIN_RECORDS_PER_TASK = 50_000


class KafkaReadError(RuntimeError):
    """A partition could not be read up to the end Spark planned for it."""


class OffsetOutOfRange(KafkaReadError):
    """A checkpointed offset outside the partition's log (topic recreated, retention, another cluster)."""


class PartitionRange(InputPartition):
    """Offsets ``[start, end)`` of one Kafka partition: the unit of work of one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class RangeGroup(InputPartition):
    """Ranges of several partitions that one Spark task reads one after the other."""

    def __init__(self, ranges: Sequence[PartitionRange]) -> None:
        super().__init__([r.partition for r in ranges])
        self.ranges = list(ranges)


def ranges_group(ranges: Sequence[PartitionRange], min_records: int) -> list[RangeGroup]:
    """``ranges`` in order, in groups of at least ``min_records`` records each (the last one may hold fewer)."""
    groups: list[RangeGroup] = []
    current: list[PartitionRange] = []
    records = 0
    for span in ranges:
        current.append(span)
        records += span.end - span.start
        if records >= min_records:
            groups.append(RangeGroup(current))
            current, records = [], 0
    if current:
        groups.append(RangeGroup(current))
    return groups


def reader_config(options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings of a reader: assigned its partitions, no group joined; the ``kafka.*`` options on top."""
    client = {"bootstrap.servers": options["bootstrap"], **kafka_properties(options)}
    defaults = ConsumerDefaults(options.get("group", "sluice-pipeline"), fetch_wait_ms=FETCH_WAIT_MS, log_level=0)
    return consumer_config(client, defaults)


def topic_partitions(consumer: Consumer, topic: str, timeout: float = 10.0) -> list[int]:
    """Partition numbers of ``topic`` (an error if it does not exist)."""
    metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise KafkaReadError(f"topic {topic} does not exist or has no partitions")
    return sorted(metadata.partitions)


def partition_ends(consumer: Consumer, topic: str, partitions: Sequence[int], timeout: float = 10.0) -> dict[int, int]:
    """Offset after the last record of each partition.

    The high watermark alone is not enough: tansu answers the base offset of the last batch
    plus one. So fetch from there: the batch comes whole (librdkafka queues a fetched batch at
    once, and :func:`messages_next` takes all that is queued), and the offset after the last
    record fetched is the end. A partition is done once its fetch reached the watermark's record
    (or reported its end), without waiting for an end-of-partition event: on a topic being
    written to, that event keeps moving away, and each wait for it costs a fetch wait.
    """
    ends: dict[int, int] = {}
    assign: list[TopicPartition] = []
    for partition in partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        if high <= 0:
            ends[partition] = 0
        else:
            ends[partition] = high
            assign.append(TopicPartition(topic, partition, high - 1))
    if not assign:
        return ends
    consumer.assign(assign)
    pending = {tp.partition: tp.offset for tp in assign}
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            for message in messages_next(consumer, 10_000, min(0.5, max(0.0, deadline - time.monotonic()))):
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                partition, offset = _position(message)
                if error is not None:  # end of partition: the offset is the one after the last record
                    ends[partition] = max(ends[partition], offset)
                    pending.pop(partition, None)
                else:
                    ends[partition] = max(ends[partition], offset + 1)
                    if offset >= pending.get(partition, offset + 1):
                        pending.pop(partition)
    finally:
        consumer.unassign()
    if pending:
        raise KafkaReadError(f"could not find the end of {topic} partitions {sorted(pending)} within {timeout}s")
    return ends


def partition_starts(
    consumer: Consumer, topic: str, partitions: Sequence[int], timeout: float = 10.0
) -> dict[int, int]:
    """The first retained offset of each partition."""
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[0] for p in partitions}


def messages_next(consumer: Consumer, limit: int, timeout: float) -> list[Message]:
    """Up to ``limit`` messages: the first waited for (at most ``timeout``), then only those already fetched.

    ``consume(limit, timeout)`` alone returns when it has ``limit`` messages or the timeout has
    passed, so a read of a few records would always pay the whole timeout.
    """
    first = consumer.consume(1, timeout=timeout)
    if not first or limit <= 1:
        return first
    return first + consumer.consume(limit - 1, timeout=0)


def _position(message: Message) -> tuple[int, int]:
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None:
        raise KafkaReadError("a fetched record without a partition or an offset")
    return partition, offset


def _headers(message: Message) -> list[dict[str, Any]]:
    return [{"key": item[0], "value": item[1]} for item in (message.headers() or [])]


def partition_read(options: Mapping[str, str], span: PartitionRange) -> Iterator[pa.RecordBatch]:
    """Records ``[start, end)`` of one partition as Arrow batches; fails if none comes for ``readTimeoutSeconds``.

    With a ``value.format`` option, values are decoded (to compact JSON) here, once per
    record; a record that does not decode is left out, logged and noted (:class:`ValueDecoding`).
    """
    if span.end <= span.start:
        return
    options = options_lowered(options)
    idle_limit = float(options.get(READ_TIMEOUT_OPTION, "60"))
    decoding = ValueDecoding(options, span.topic, span.partition)
    consumer = Consumer(reader_config(options))
    columns: dict[str, list[Any]] = {name: [] for name in _ARROW_SCHEMA.names}
    try:
        consumer.assign([TopicPartition(span.topic, span.partition, span.start)])
        position = span.start
        last_progress = time.monotonic()
        while position < span.end:
            messages = messages_next(consumer, 10_000, 0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                _, offset = _position(message)
                if offset < position:
                    continue
                if offset >= span.end:
                    position = span.end
                    break
                keep, value = decoding.value(message, offset)
                position = offset + 1
                last_progress = time.monotonic()
                if not keep:
                    continue
                _, stamp = message.timestamp()
                columns["key"].append(message.key())
                columns["value"].append(value)
                columns["headers"].append(_headers(message))
                columns["topic"].append(span.topic)
                columns["partition"].append(span.partition)
                columns["offset"].append(offset)
                columns["timestamp"].append(stamp * 1000 if stamp >= 0 else None)
            if len(columns["offset"]) >= _ARROW_BATCH_ROWS:
                yield pa.RecordBatch.from_pydict(columns, schema=_ARROW_SCHEMA)
                columns = {name: [] for name in _ARROW_SCHEMA.names}
            if position < span.end and time.monotonic() - last_progress > idle_limit:
                raise KafkaReadError(
                    f"{span.topic}[{span.partition}] stopped at offset {position} before {span.end} ({idle_limit}s)"
                )
        decoding.note()
        if columns["offset"]:
            yield pa.RecordBatch.from_pydict(columns, schema=_ARROW_SCHEMA)
    finally:
        consumer.close()


def offsets_encode(topic: str, offsets: dict[int, int]) -> dict[str, Any]:
    """The JSON form of stream offsets stored in the checkpoint."""
    return {"topic": topic, "partitions": {str(p): o for p, o in sorted(offsets.items())}}


def offsets_decode(offset: dict[str, Any]) -> dict[int, int]:
    return {int(p): int(o) for p, o in offset["partitions"].items()}


class KafkaBatchReader(DataSourceReader):
    """Everything between the starting and ending offsets (default: all retained records)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options_lowered(options)
        value_formats(self.options)  # a value format that cannot work fails the read before it starts
        self.topic = self.options["topic"]

    def partitions(self) -> Sequence[InputPartition]:
        consumer = Consumer(reader_config(self.options))
        try:
            numbers = topic_partitions(consumer, self.topic)
            starts = partition_starts(consumer, self.topic, numbers)
            ends = partition_ends(consumer, self.topic, numbers)
        finally:
            consumer.close()
        return [PartitionRange(self.topic, p, starts[p], ends[p]) for p in numbers]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        return partition_read(self.options, partition)


class KafkaStreamReader(DataSourceStreamReader):
    """Micro-batches between checkpointed offsets; new partitions are read from their start."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options_lowered(options)
        value_formats(self.options)  # a value format that cannot work fails the stream before it starts
        self.topic = self.options["topic"]
        self.starting = self.options.get(STARTING_OFFSETS_OPTION, "earliest")
        self._consumer: Consumer | None = None

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(reader_config(self.options))
        return self._consumer

    def initialOffset(self) -> dict[str, Any]:
        numbers = topic_partitions(self.consumer, self.topic)
        if self.starting == "latest":
            return offsets_encode(self.topic, partition_ends(self.consumer, self.topic, numbers))
        return offsets_encode(self.topic, partition_starts(self.consumer, self.topic, numbers))

    def latestOffset(self) -> dict[str, Any]:
        numbers = topic_partitions(self.consumer, self.topic)
        return offsets_encode(self.topic, partition_ends(self.consumer, self.topic, numbers))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = offsets_decode(start), offsets_decode(end)
        first = self.offsets_checked(first, last)
        ranges = [
            PartitionRange(self.topic, p, first.get(p, 0), last[p]) for p in sorted(last) if last[p] > first.get(p, 0)
        ]
        return ranges_group(ranges, int(self.options.get(MIN_RECORDS_PER_TASK_OPTION, MIN_RECORDS_PER_TASK)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangeGroup)
        for span in partition.ranges:
            yield from partition_read(self.options, span)

    def offsets_checked(self, first: dict[int, int], last: dict[int, int]) -> dict[int, int]:
        """The batch's start offsets, held against the log as it is now (each micro-batch, the first included).

        An offset past the partition's end or before its start means the checkpoint is not of this log:
        the topic was recreated, retention removed records, or the pipeline now reads another cluster.
        ``on_offset_reset`` says what then: ``fail`` (the default, with how to reset), ``earliest`` or ``latest``;
        each reset is written to the ``reset_log`` file for the run's record.
        """
        lows = partition_starts(self.consumer, self.topic, sorted(last))
        policy = self.options.get("on_offset_reset", "fail")
        name = self.options.get("pipeline", "")
        checked = dict(first)
        for p, offset in first.items():
            if p not in last or lows[p] <= offset <= last[p]:
                continue
            if policy == "fail":
                raise OffsetOutOfRange(
                    f"pipeline {name}: topic {self.topic} partition {p}: the checkpoint is at offset {offset}, but "
                    f"the log holds offsets {lows[p]} to {last[p]} (the topic was recreated, retention removed "
                    f"records, or this is another cluster). To start over: runpipeline {name} --reset-checkpoint; "
                    f"or set the pipeline's on_offset_reset to earliest or latest."
                )
            checked[p] = lows[p] if policy == "earliest" else last[p]
            self.reset_note(p, offset, lows[p], last[p], checked[p])
        return checked

    def reset_note(self, partition: int, offset: int, low: int, high: int, now: int) -> None:
        path = self.options.get("reset_log")
        if path:
            note = {"topic": self.topic, "partition": partition, "checkpoint": offset, "low": low, "high": high}
            with open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps({**note, "start": now}) + "\n")

    def commit(self, end: dict[str, Any]) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class KafkaDataSource(DataSource):
    """``format("sluice-kafka")``: options ``bootstrap``, ``topic`` (a write may use a column instead), ``kafka.*``;
    reads also ``value.format``, ``value.avro_schema``, ``registry`` (see :func:`value_formats`), ``skip_log`` and
    ``readTimeoutSeconds``; streams ``startingOffsets`` and ``minRecordsPerTask``; writes ``flushTimeoutSeconds``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaWriter(self.options)
