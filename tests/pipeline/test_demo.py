"""The demo pipeline shapes the raw feed into ``demo.scores`` records (keyed by match, league header)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from demo.pipeline import demo_pipeline_setup
from pipeline.job import RULE_HEADER
from tests.support.pipeline_records import topic_read

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_demo_pipeline_shapes_raw_reports_into_scores(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    suffix = pipeline_kafka.topic(prefix="demo")  # a unique name; the demo creates its own topics from it
    sink = f"{suffix}.scores"
    pipeline, producer = demo_pipeline_setup(
        pipeline_kafka.bootstrap,
        start_producer=False,
        raw_topic=f"{suffix}.raw",
        sink_topic=sink,
        dead_letter_topic=f"{suffix}.invalid",
        name="demo-test",
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    for _ in range(300):
        producer.step()
    assert producer.flush() == 0

    call_command("runpipeline", pipeline.name, "--once")

    scores = topic_read(pipeline_kafka.bootstrap, sink)
    letters = topic_read(pipeline_kafka.bootstrap, f"{suffix}.invalid")
    assert scores
    for record in scores:
        value = record.json()
        assert set(value) == {"match", "league", "home", "away", "score", "minute", "ts"}
        assert record.key == value["match"].encode()
        assert value["match"].startswith("match-")
        assert record.headers["league"] == value["league"].encode()
        assert value["league"] in {"premier", "liga"}
        assert len(value["score"]) == 2
    assert {letter.headers[RULE_HEADER].decode() for letter in letters} <= {"minimum:/clock", "required:/teams"}
