"""``runpipeline --once`` over files: JSON lines and Parquet, valid rows to the sink, the rest to dead letters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from django.core.management import call_command

from pipeline.job import RULE_HEADER
from pipeline.models import PipelineRun
from pipeline.services import pipeline_upsert
from tests.support.pipeline_records import SCORE_SCHEMA, raw_scores, topic_read

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FILE_SQL = "SELECT match, league, minute, seq FROM input WHERE league = 'liga' OR league = 'premier'"


def backfill(name: str, kafka: Any, tmp_path: Path, files: str, file_format: str) -> tuple[str, str]:
    sink, dead = kafka.topic(partitions=2, prefix="sink"), kafka.topic(prefix="dlq")
    pipeline_upsert(
        name=name,
        source_kind="files",
        source_files=files,
        source_format=file_format,
        json_schema=SCORE_SCHEMA,
        sql=FILE_SQL,
        key_field="match",
        header_fields={"league": "league"},
        sink_topic=sink,
        dead_letter_topic=dead,
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    call_command("runpipeline", name, "--once")
    return sink, dead


def test_json_files_backfill(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    records = raw_scores(600)
    folder = tmp_path / "in"
    folder.mkdir()
    for part in range(3):
        lines = [r.value.decode() for r in records[part::3]]
        (folder / f"scores-{part}.json").write_text("\n".join(lines) + "\n")
    (folder / "ignored.txt").write_text("not matched by the glob\n")

    sink, dead = backfill("backfill-json", pipeline_kafka, tmp_path, str(folder / "*.json"), "json")

    valid = {r.seq: r for r in records if r.rule is None}
    out = topic_read(pipeline_kafka.bootstrap, sink)
    assert sorted(r.json()["seq"] for r in out) == sorted(valid)
    for record in out:
        value = record.json()
        assert set(value) == {"match", "league", "minute", "seq"}
        assert record.key == value["match"].encode()
        assert record.headers["league"] == value["league"].encode()
    letters = topic_read(pipeline_kafka.bootstrap, dead)
    expected_rules = sorted(r.rule for r in records if r.rule is not None)
    assert sorted(r.headers[RULE_HEADER].decode() for r in letters) == expected_rules
    assert all(r.headers["sluice.topic"].decode().endswith(".json") for r in letters)
    run = PipelineRun.objects.get(pipeline__name="backfill-json")
    assert (run.status, run.records_in, run.records_valid) == ("succeeded", 600, len(valid))
    assert run.records_invalid == len(expected_rules)

    # A second --once finds nothing new in the checkpointed files.
    call_command("runpipeline", "backfill-json", "--once")
    assert len(topic_read(pipeline_kafka.bootstrap, sink)) == len(out)


def test_parquet_files_backfill(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    rows = [
        {"match": f"match-{i % 7}", "league": "liga" if i % 2 else "premier", "minute": i % 100, "seq": i}
        for i in range(400)
    ]
    for i in range(0, 400, 40):
        rows[i]["league"] = "serie-a"  # enum:/league
    for i in range(5, 400, 50):
        rows[i]["minute"] = 121  # maximum:/minute
    folder = tmp_path / "parquet"
    folder.mkdir()
    frame = pd.DataFrame(rows)
    frame.iloc[:200].to_parquet(folder / "a.parquet", index=False)
    frame.iloc[200:].to_parquet(folder / "b.parquet", index=False)

    sink, dead = backfill("backfill-parquet", pipeline_kafka, tmp_path, str(folder / "*.parquet"), "parquet")

    def rule(row: dict[str, Any]) -> str | None:
        if row["league"] == "serie-a":
            return "enum:/league"
        return "maximum:/minute" if row["minute"] > 120 else None

    out = topic_read(pipeline_kafka.bootstrap, sink)
    assert sorted(r.json()["seq"] for r in out) == [row["seq"] for row in rows if rule(row) is None]
    assert all(r.headers["league"] == r.json()["league"].encode() for r in out)
    letters = topic_read(pipeline_kafka.bootstrap, dead)
    by_seq = {json.loads(r.value or b"")["seq"]: r.headers[RULE_HEADER].decode() for r in letters}
    assert by_seq == {row["seq"]: rule(row) for row in rows if rule(row) is not None}


def test_csv_files_backfill(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    folder.mkdir()
    (folder / "scores.csv").write_text(
        "match,league,minute,seq\n"
        "match-1,liga,10,0\n"
        "match-2,premier,11,1\n"
        "match-3,serie-a,12,2\n"  # enum:/league
        "match-4,liga,ten,3\n"  # not an integer: read as NULL, so required:/minute
        "match-5,liga,200,4\n"  # maximum:/minute
    )
    sink, dead = backfill("backfill-csv", pipeline_kafka, tmp_path, str(folder / "*.csv"), "csv")
    out = topic_read(pipeline_kafka.bootstrap, sink)
    assert sorted((r.key, r.json()["minute"]) for r in out) == [(b"match-1", 10), (b"match-2", 11)]
    letters = topic_read(pipeline_kafka.bootstrap, dead)
    assert sorted(r.headers[RULE_HEADER].decode() for r in letters) == [
        "enum:/league",
        "maximum:/minute",
        "required:/minute",
    ]
