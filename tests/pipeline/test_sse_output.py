"""A browser's view: an SSE route on the pipeline's sink, filtered by the header the pipeline set."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command

from pipeline.services import pipeline_upsert
from tests.support.pipeline_records import SCORE_SCHEMA, SCORE_SQL, raw_scores, records_produce
from tests.support.sse_client import EventParser

pytestmark = [pytest.mark.slow]


def test_sse_client_gets_pipeline_output_filtered_by_its_header(
    spark: Any, gateway: Any, route: Any, pipeline_kafka: Any, tmp_path: Path
) -> None:
    raw = pipeline_kafka.topic(partitions=3, prefix="raw")
    sink = pipeline_kafka.topic(partitions=3, prefix="scores")
    records = raw_scores(300)
    records_produce(pipeline_kafka.bootstrap, raw, records, 3)
    pipeline_upsert(
        name="scores-sse",
        source_topic=raw,
        json_schema=SCORE_SCHEMA,
        sql=SCORE_SQL,
        key_field="match",
        header_fields={"league": "league"},
        sink_topic=sink,
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    call_command("runpipeline", "scores-sse", "--once")
    route(
        path=f"/{sink}/{{league}}",
        topic=sink,
        initial="earliest",
        filters=[{"headers": {"league": "${params.league}"}}],
    )
    expected = sorted(r.seq for r in records if r.rule is None and r.league == "liga")

    parser = EventParser()
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    with httpx.stream("GET", f"{gateway.url}/{sink}/liga", timeout=15) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw():
            got += [json.loads(e.data) for e in parser.feed(chunk) if e.has_data]
            if len(got) >= len(expected) or time.monotonic() > deadline:
                break
    assert sorted(value["seq"] for value in got) == expected
    assert {value["league"] for value in got} == {"liga"}
