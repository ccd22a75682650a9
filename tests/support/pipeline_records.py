"""Test data for pipelines: raw football scores, some of them broken on purpose, and reading topics back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pipeline.datasource import partition_ends, topic_partitions

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["match", "league", "minute", "seq"],
    "properties": {
        "match": {"type": "string", "pattern": "^match-[0-9]+$"},
        "league": {"enum": ["premier", "liga"]},
        "home": {"type": "string", "minLength": 1, "maxLength": 40},
        "away": {"type": "string", "minLength": 1, "maxLength": 40},
        "score": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "minute": {"type": "integer", "minimum": 0, "maximum": 120},
        "seq": {"type": "integer"},
    },
}
SCORE_SQL = (
    "SELECT match, league, home, away, score, minute, seq, _partition AS src_partition, _offset AS src_offset"
    " FROM input"
)

# How a record is broken, and the rule the pipeline must name for it.
BREAKAGES: list[tuple[str, Any]] = [
    ("required:/match", lambda v: {k: x for k, x in v.items() if k != "match"}),
    ("type:/minute", lambda v: {**v, "minute": str(v["minute"])}),
    ("maximum:/minute", lambda v: {**v, "minute": 500}),
    ("enum:/league", lambda v: {**v, "league": "serie-a"}),
    ("pattern:/match", lambda v: {**v, "match": "game 7"}),
    ("minimum:/score/*", lambda v: {**v, "score": [1, -1]}),
    ("json:/", lambda v: json.dumps(v)[:-3]),
]


@dataclass
class RawRecord:
    seq: int
    key: str
    value: bytes
    league: str
    rule: str | None
    partition: int = -1
    offset: int = -1


def raw_scores(count: int, invalid_every: int = 20) -> list[RawRecord]:
    """``count`` score updates; every ``invalid_every``-th one breaks a rule (cycling through BREAKAGES)."""
    records = []
    for seq in range(count):
        league = "premier" if seq % 2 else "liga"
        match = f"match-{seq % 37}"
        value: Any = {
            "match": match,
            "league": league,
            "home": "Arsenal",
            "away": "Chelsea",
            "score": [seq % 4, seq % 3],
            "minute": seq % 90,
            "seq": seq,
            "status": "live",
        }
        rule = None
        if seq % invalid_every == invalid_every - 1:
            rule, breakage = BREAKAGES[(seq // invalid_every) % len(BREAKAGES)]
            value = breakage(value)
        text = value if isinstance(value, str) else json.dumps(value)
        records.append(RawRecord(seq, match, text.encode(), league, rule))
    return records


def records_produce(bootstrap: str, topic: str, records: list[RawRecord], partitions: int) -> None:
    """Produce ``records`` round-robin over the partitions, noting where each one landed."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    failures: list[str] = []

    def delivered(record: RawRecord) -> Any:
        def report(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                failures.append(str(error))
            else:
                record.partition, record.offset = message.partition(), message.offset()

        return report

    for record in records:
        producer.produce(
            topic,
            key=record.key.encode(),
            value=record.value,
            partition=record.seq % partitions,
            headers=[("origin", b"test")],
            on_delivery=delivered(record),
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures


@dataclass
class ReadRecord:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes] = field(default_factory=dict)
    partition: int = 0
    offset: int = 0

    def json(self) -> Any:
        assert self.value is not None
        return json.loads(self.value)


def topic_read(bootstrap: str, topic: str) -> list[ReadRecord]:
    """Every record of ``topic``, read to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sluice-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    try:
        numbers = topic_partitions(consumer, topic)
        ends = partition_ends(consumer, topic, numbers)
        pending = {p for p in numbers if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        records: list[ReadRecord] = []
        idle = 0
        while pending:
            messages = consumer.consume(1000, timeout=1)
            idle = 0 if messages else idle + 1
            assert idle < 30, f"{topic}: partitions {pending} stopped short of {ends}"
            for message in messages:
                partition, offset = message.partition(), message.offset()
                if message.error() is not None:
                    continue
                records.append(
                    ReadRecord(message.key(), message.value(), dict(message.headers() or []), partition, offset)
                )
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
        return records
    finally:
        consumer.close()
