"""A pipeline whose checkpoint is ahead of its source topic (recreated: a fresh broker, the same checkpoint).

It fails with an error that names the pipeline, topic, partition, checkpointed offset and the
log's range, and says how to reset; with ``on_offset_reset: earliest`` it reads the new records.
In neither case does it report success having read nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.models import Pipeline, PipelineRun
from pipeline.services import pipeline_upsert
from streams.server.broker import EmbeddedBroker, free_port, topic_ensure
from tests.conftest import gateway_env
from tests.pipeline.test_kafka_pipeline import PipelineProcess
from tests.support.pipeline_records import SCORE_SCHEMA, SCORE_SQL, raw_scores, records_produce, topic_read

pytestmark = [pytest.mark.slow]


def pipeline_make(name: str, checkpoint: Path) -> None:
    pipeline_upsert(
        name=name,
        source_topic="recreated-raw",
        json_schema=SCORE_SCHEMA,
        sql=SCORE_SQL,
        key_field="match",
        sink_topic="recreated-sink",
        trigger_seconds=1,
        checkpoint_location=str(checkpoint),
    )


def broker_with_records(port: int, count: int) -> EmbeddedBroker:
    """A fresh broker on ``port`` with ``count`` valid raw records."""
    broker = EmbeddedBroker(port=port).start()
    for topic in ("recreated-raw", "recreated-sink"):
        topic_ensure(broker.bootstrap, topic, 1)
    valid = [r for r in raw_scores(count * 2) if r.rule is None][:count]
    records_produce(broker.bootstrap, "recreated-raw", valid, 1)
    return broker


def test_checkpoint_past_the_end_fails_then_earliest_reads_the_new_records(
    stream_db: None, kafka: Any, tmp_path: Path
) -> None:
    port = free_port()
    checkpoint = tmp_path / "checkpoint"
    pipeline_make("recreated", checkpoint)
    first = broker_with_records(port, 100)
    try:
        env = {**gateway_env(kafka), "KAFKA_BOOTSTRAP_SERVERS": first.bootstrap}
        run = PipelineProcess(env, "recreated", "--once")
        assert run.wait(300) == 0, run.output()
    finally:
        first.stop()
    # The same address, a fresh broker: the topic is recreated with fewer records than were read.
    fresh = broker_with_records(port, 40)
    try:
        env = {**gateway_env(kafka), "KAFKA_BOOTSTRAP_SERVERS": fresh.bootstrap}
        failed = PipelineProcess(env, "recreated", "--once")
        assert failed.wait(300) != 0, failed.output()
        output = failed.output()
        assert "pipeline recreated: topic recreated-raw partition 0: the checkpoint is at offset " in output
        assert "but the log holds offsets 0 to " in output
        assert "runpipeline recreated --reset-checkpoint" in output
        assert "finished" not in output.splitlines()[-1]
        last = PipelineRun.objects.filter(pipeline__name="recreated").order_by("-id").first()
        assert last is not None
        assert last.status == "failed"
        assert "the checkpoint is at offset" in last.error
        assert Pipeline.objects.filter(name="recreated").update(on_offset_reset="earliest") == 1
        reset = PipelineProcess(env, "recreated", "--once")
        assert reset.wait(300) == 0, reset.output()[-3000:]
        assert "offset reset: topic recreated-raw partition 0: the checkpoint was at" in reset.output()
        last = PipelineRun.objects.filter(pipeline__name="recreated").order_by("-id").first()
        assert last is not None
        assert (last.status, last.offset_resets) == ("succeeded", 1)
        assert last.records_in == 40
        assert len(topic_read(fresh.bootstrap, "recreated-sink")) == 40
    finally:
        fresh.stop()
