"""``runpipeline --once`` over an Avro topic (Confluent wire format, loopback registry): the SQL sees decoded JSON."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from pipeline.models import PipelineRun
from pipeline.services import pipeline_upsert
from streams.services import topic_upsert
from tests.support.pipeline_records import SCORE_SCHEMA, topic_read
from tests.support.schema_registry import registry_running

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCORE_AVRO = {
    "type": "record",
    "name": "Score",
    "fields": [
        {"name": "match", "type": "string"},
        {"name": "league", "type": "string"},
        {"name": "score", "type": {"type": "array", "items": "int"}},
        {"name": "minute", "type": "int"},
        {"name": "seq", "type": "long"},
    ],
}


def test_avro_source_topic_reaches_the_sql_as_json(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    raw, sink = pipeline_kafka.topic(partitions=2, prefix="raw"), pipeline_kafka.topic(prefix="sink")
    scores = [
        {"match": f"match-{i % 3}", "league": "liga", "score": [i % 4, 1], "minute": i, "seq": i} for i in range(20)
    ]
    out = StringIO()
    with registry_running() as server:
        # The Topic row carries the format; the pipeline names the topic.
        topic_upsert(name=raw, value_format="avro", registry=server.registry.url)
        serialize = AvroSerializer(SchemaRegistryClient({"url": server.registry.url}), json.dumps(SCORE_AVRO))
        context = SerializationContext(raw, MessageField.VALUE)
        for score in scores:
            pipeline_kafka.produce(raw, bytes(serialize(score, context)), partition=score["seq"] % 2, flush=False)
        pipeline_kafka.produce(raw, b"not avro", partition=0)  # offset 10 of partition 0: skipped
        pipeline_upsert(
            name="avro-scores",
            source_topic=raw,
            json_schema=SCORE_SCHEMA,
            sql="SELECT match, league, score, minute, seq FROM input",
            sink_topic=sink,
            checkpoint_location=str(tmp_path / "checkpoint"),
        )
        call_command("runpipeline", "avro-scores", "--once", stdout=out)

    assert sorted((r.json() for r in topic_read(pipeline_kafka.bootstrap, sink)), key=lambda v: v["seq"]) == scores
    output = out.getvalue()
    assert f"skipped 1 record whose value does not decode: topic {raw} partition 0 offsets 10 to 10" in output
    run = PipelineRun.objects.get(pipeline__name="avro-scores")
    assert (run.status, run.records_in, run.records_valid) == ("succeeded", 20, 20)
