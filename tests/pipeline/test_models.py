"""Pipeline configuration: validation like the admin form, services, runs, the admin pages, the command's errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from pipeline.models import Pipeline, PipelineRun
from pipeline.runner import pipeline_checkpoint
from pipeline.services import pipeline_run_finish, pipeline_run_progress, pipeline_run_start, pipeline_upsert
from streams.core.clusters import ClusterSpec
from streams.models import Schema

SCHEMA = {"type": "object", "properties": {"match": {"type": "string"}}}


def fields(**overrides: Any) -> dict[str, Any]:
    return {"source_topic": "raw", "json_schema": SCHEMA, "sink_topic": "scores", **overrides}


@pytest.mark.django_db
def test_upsert_creates_then_updates() -> None:
    first = pipeline_upsert(name="scores", **fields())
    second = pipeline_upsert(name="scores", **fields(sql="SELECT match FROM input", header_fields={"m": "match"}))
    assert first.pk == second.pk
    assert Pipeline.objects.get().sql == "SELECT match FROM input"


@pytest.mark.django_db
def test_upsert_takes_a_schema_by_name() -> None:
    Schema.objects.create(name="score", json_schema=SCHEMA)
    pipeline = pipeline_upsert(name="scores", **fields(json_schema=None, schema="score"))
    assert pipeline.json_schema_resolved() == SCHEMA
    with pytest.raises(Schema.DoesNotExist):
        pipeline_upsert(name="other", **fields(json_schema=None, schema="missing"))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"source_topic": ""}, "source_topic"),
        ({"source_files": "/data/*.json"}, "source_files"),
        ({"source_kind": "files", "source_topic": ""}, "source_files"),
        ({"json_schema": None}, "json_schema"),
        ({"json_schema": {"type": "string"}}, "json_schema"),
        ({"header_fields": {"league": 3}}, "header_fields"),
        ({"header_fields": ["league"]}, "header_fields"),
        ({"dead_letter_topic": "scores"}, "dead_letter_topic"),
        ({"sink_topic": "raw"}, "sink_topic"),
        ({"sink_topic": "bad topic"}, "sink_topic"),
        ({"trigger_seconds": 0}, "trigger_seconds"),
    ],
)
def test_invalid_pipelines_are_refused(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        pipeline_upsert(name="scores", **fields(**overrides))
    assert field in caught.value.message_dict
    assert not Pipeline.objects.exists()


@pytest.mark.django_db
def test_schema_named_and_inline_are_exclusive() -> None:
    schema = Schema.objects.create(name="score", json_schema=SCHEMA)
    with pytest.raises(ValidationError, match="one of the two"):
        pipeline_upsert(name="scores", **fields(schema=schema))


@pytest.mark.django_db
def test_runs_count_batches_and_mark_the_unfinished(settings: Any) -> None:
    pipeline = pipeline_upsert(name="scores", **fields())
    first = pipeline_run_start(pipeline=pipeline, once=False)
    pipeline_run_progress(run=first, records_in=10, records_valid=9, records_invalid=1)
    pipeline_run_progress(run=first, records_in=5, records_valid=5, records_invalid=0)
    second = pipeline_run_start(pipeline=pipeline, once=True)
    pipeline_run_finish(run=second, error="boom")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.batches, first.records_in, first.records_valid, first.records_invalid) == (
        "interrupted",
        2,
        15,
        14,
        1,
    )
    assert (second.status, second.error, second.finished is not None) == ("failed", "boom", True)
    settings.SLUICE = {**settings.SLUICE, "PIPELINE_CHECKPOINT_DIR": "/var/lib/sluice"}
    one, other = ClusterSpec.of("default", "k1:9092"), ClusterSpec.of("default", "k2:9092")
    # Per pipeline and per cluster: offsets of one cluster mean nothing on another.
    assert pipeline_checkpoint(pipeline, one).startswith("/var/lib/sluice/scores/default-")
    assert pipeline_checkpoint(pipeline, one) != pipeline_checkpoint(pipeline, other)
    pipeline.checkpoint_location = "/elsewhere"
    assert pipeline_checkpoint(pipeline, one) == "/elsewhere"


def test_admin_shows_runs_read_only(admin_client_logged_in: Any) -> None:
    pipeline = pipeline_upsert(name="scores", **fields())
    run = pipeline_run_start(pipeline=pipeline, once=True)
    pipeline_run_progress(run=run, records_in=1234, records_valid=1200, records_invalid=34)
    page = admin_client_logged_in.get(f"/admin/pipeline/pipeline/{pipeline.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "1234" in html
    assert "runs-0-records_in" not in html  # read-only: no form field
    assert admin_client_logged_in.get("/admin/pipeline/pipeline/").status_code == 200
    assert admin_client_logged_in.get("/admin/pipeline/pipeline/add/").status_code == 200
    assert PipelineRun.objects.count() == 1


@pytest.mark.django_db
def test_runpipeline_names_a_missing_pipeline(settings: Any) -> None:
    settings.SLUICE = {**settings.SLUICE, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    with pytest.raises(CommandError, match="no pipeline called 'nope'"):
        call_command("runpipeline", "nope", "--once")


@pytest.mark.django_db
def test_runpipeline_needs_kafka(settings: Any) -> None:
    pipeline_upsert(name="scores", **fields())
    settings.SLUICE = {**settings.SLUICE, "KAFKA_BOOTSTRAP_SERVERS": ""}
    with pytest.raises(CommandError, match="KAFKA_BOOTSTRAP_SERVERS"):
        call_command("runpipeline", "scores")


@pytest.mark.django_db
def test_runpipeline_refuses_a_disabled_pipeline(settings: Any) -> None:
    pipeline_upsert(name="scores", **fields(enabled=False))
    settings.SLUICE = {**settings.SLUICE, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    with pytest.raises(CommandError, match="disabled"):
        call_command("runpipeline", "scores")
    assert not PipelineRun.objects.exists()
