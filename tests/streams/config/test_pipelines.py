"""The pipelines section of applyconfig / exportconfig (SPEC 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError

from guards.models import Guard
from pipeline.models import Pipeline
from streams.models import Route, Schema, Topic
from tests.support.config_commands import FIXTURES, SPEC_EXAMPLE, applyconfig, applyconfig_refused, exportconfig, rows

BROKEN = FIXTURES / "broken"
SCORE = {"type": "object", "properties": {"match": {"type": "string"}}}


def pipelines() -> list[dict[str, Any]]:
    """Every pipeline, as comparable data (no ids or timestamps)."""
    skip = {"id", "created", "updated"}
    out = []
    for row in Pipeline.objects.select_related("schema"):
        values = {f.name: getattr(row, f.attname) for f in Pipeline._meta.concrete_fields if f.name not in skip}
        values["schema"] = row.schema.name if row.schema is not None else None
        out.append(values)
    return out


@pytest.mark.services
def test_spec_example_pipeline_applies(db: None) -> None:
    out = applyconfig(SPEC_EXAMPLE)

    assert out.splitlines()[-2:] == [
        "created pipeline scores",
        f"{SPEC_EXAMPLE}: 6 created, 0 updated, 0 unchanged, 0 deleted; applied",
    ]
    pipeline = Pipeline.objects.get(name="scores")
    assert (pipeline.source_kind, pipeline.source_topic, pipeline.source_files) == ("kafka", "raw-scores", "")
    assert pipeline.schema == Schema.objects.get(name="score")
    assert pipeline.json_schema is None
    assert pipeline.sql == "SELECT * FROM input WHERE status <> 'test'"
    assert (pipeline.key_field, pipeline.header_fields) == ("match", {"tag": "league"})
    assert (pipeline.sink_topic, pipeline.dead_letter_topic) == ("events", "events.dlq")
    assert (pipeline.trigger_seconds, pipeline.checkpoint_location, pipeline.enabled) == (5, "", True)


def test_applying_twice_changes_nothing(db: None) -> None:
    applyconfig(SPEC_EXAMPLE)
    before = pipelines()
    stamp = Pipeline.objects.get().updated

    out = applyconfig(SPEC_EXAMPLE)

    assert "unchanged pipeline scores" in out.splitlines()
    assert out.splitlines()[-1].endswith("0 created, 0 updated, 6 unchanged, 0 deleted; applied")
    assert pipelines() == before
    assert Pipeline.objects.get().updated == stamp


def test_files_source_inline_schema_and_every_field(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(
        "pipelines:\n"
        "  - name: backfill\n"
        "    description: last season\n"
        "    source: {files: 'data/*.csv', format: csv}\n"
        "    json_schema: {type: object, properties: {match: {type: string}}}\n"
        "    sink: scores.v2\n"
        "    trigger_seconds: 30\n"
        "    checkpoint: /var/lib/sluice/backfill\n"
        "    enabled: false\n"
    )

    assert "created pipeline backfill" in applyconfig(path)

    pipeline = Pipeline.objects.get(name="backfill")
    assert (pipeline.source_kind, pipeline.source_files, pipeline.source_format) == ("files", "data/*.csv", "csv")
    assert (pipeline.schema, pipeline.json_schema) == (None, SCORE)
    assert (pipeline.trigger_seconds, pipeline.checkpoint_location, pipeline.enabled) == (
        30,
        "/var/lib/sluice/backfill",
        False,
    )
    assert "unchanged pipeline backfill" in applyconfig(path)
    # A Kafka source again: the kind follows the source's key.
    kafka = tmp_yaml(path.read_text().replace("{files: 'data/*.csv', format: csv}", "{kafka: raw}"), "kafka.yaml")
    assert "updated pipeline backfill" in applyconfig(kafka)
    pipeline.refresh_from_db()
    assert (pipeline.source_kind, pipeline.source_topic, pipeline.source_files) == ("kafka", "raw", "")


def test_export_round_trip(db: None, tmp_path: Path, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    applyconfig(
        tmp_yaml(
            "pipelines:\n"
            "  - {name: files, source: {files: /data/*.parquet, format: parquet}, json_schema: "
            '{"type": "object", "properties": {"n": {"type": "integer"}}}, sink: numbers, trigger_seconds: 60}\n'
        )
    )
    before_rows, before_pipelines = rows(), pipelines()
    out = tmp_path / "exported.yaml"
    exportconfig("-o", str(out))
    text = out.read_text()
    assert "pipelines:\n- name: files\n  source:\n    files: /data/*.parquet\n    format: parquet\n" in text
    assert "- name: scores\n  source:\n    kafka: raw-scores\n  schema: score\n" in text
    assert text.index("pipelines:") > text.index("topics:")
    for model in (Pipeline, Route, Topic, Schema, Guard):
        model.objects.all().delete()

    applied = applyconfig(out)

    assert "created pipeline scores" in applied
    assert "created pipeline files" in applied
    assert (rows(), pipelines()) == (before_rows, before_pipelines)
    assert "0 created, 0 updated" in applyconfig(out)


def test_a_kafka_source_exports_without_a_format(db: None, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    Pipeline.objects.filter(name="scores").update(source_format="csv")  # meaningless for Kafka

    exported = exportconfig()

    assert "  source:\n    kafka: raw-scores\n  schema: score\n" in exported
    assert "0 created, 0 updated, 6 unchanged" in applyconfig(tmp_yaml(exported))


def test_prune_deletes_pipelines_the_file_does_not_name(db: None, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    without = tmp_yaml(SPEC_EXAMPLE.read_text().partition("pipelines:")[0])

    out = applyconfig(without, "--prune")

    assert out.splitlines()[:-1][-1] == "deleted pipeline scores"
    assert not Pipeline.objects.exists()
    assert Schema.objects.filter(name="score").exists()


# One broken file each: the one error, at file:line:column and field, and nothing changed.
BROKEN_FILES = [
    ("unknown_source_kind.yaml", "3:14", "pipelines[0].source.stream", "unknown field (known: kafka, files, format)"),
    ("unknown_pipeline_schema.yaml", "4:5", "pipelines[0].schema", "no schema named 'nowhere'"),
]


@pytest.mark.parametrize(("name", "position", "field", "message"), BROKEN_FILES)
@pytest.mark.parametrize("mode", [["--check"], []], ids=["check", "apply"])
def test_broken_pipeline_file_one_precise_error(
    db: None, name: str, position: str, field: str, message: str, mode: list[str]
) -> None:
    path = BROKEN / name
    error = applyconfig_refused(path, *mode)
    assert error.startswith(f"{path}:{position}: {field}: "), error
    assert message in error
    assert not Pipeline.objects.exists()


@pytest.mark.parametrize(
    ("source", "field", "message"),
    [
        ("{}", "pipelines[0].source", "give the source as {kafka: TOPIC} or {files: GLOB"),
        ("{kafka: raw, files: x}", "pipelines[0].source", "a source is kafka or files, not both"),
        ("{kafka: raw, format: csv}", "pipelines[0].source.format", "format is for a files source"),
        ("{files: x, format: xml}", "pipelines[0].source.format", "Value 'xml' is not a valid choice"),
        ("{kafka: events}", "pipelines[0].sink", "would feed the pipeline its own output"),
    ],
)
def test_bad_source(db: None, tmp_yaml: Any, source: str, field: str, message: str) -> None:
    path = tmp_yaml(
        f"pipelines:\n  - name: p\n    source: {source}\n    json_schema: {{properties: {{}}}}\n    sink: events\n"
    )
    with pytest.raises(CommandError) as raised:
        applyconfig(path)

    error = str(raised.value)
    assert len(error.splitlines()) == 1, error
    assert f": {field}: " in error, error
    assert message in error
