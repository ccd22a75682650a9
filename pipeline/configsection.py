"""The ``pipelines:`` section of configuration files (SPEC 6), registered from ``PipelineConfig.ready``.

An item reads as SPEC 6 writes it::

    pipelines:
      - name: scores
        source: {kafka: raw-scores}          # or {files: "data/*.json", format: json}
        schema: score                        # or an inline json_schema
        sql: "SELECT * FROM input WHERE status <> 'test'"
        key: match
        headers: {tag: league}
        sink: events
        dead_letter: events.dlq

The source's kind is not a key of its own: ``kafka`` makes a Kafka source,
``files`` a files source.
"""

from __future__ import annotations

from types import NoneType
from typing import Any

from common.config.document import ConfigError, ConfigProblem, DocPath, Document
from common.config.section import ModelSection

from .models import Pipeline
from .services import pipeline_delete, pipeline_upsert


class PipelineSection(ModelSection):
    name = "pipelines"
    label = "pipeline"
    key = "name"
    order = 50  # after schemas (a pipeline names one) and topics
    model = Pipeline
    renames = {
        "source_topic": "source.kafka",
        "source_files": "source.files",
        "source_format": "source.format",
        "key_field": "key",
        "header_fields": "headers",
        "sink_topic": "sink",
        "dead_letter_topic": "dead_letter",
        "checkpoint_location": "checkpoint",
    }
    json_types = {"json_schema": (dict, NoneType)}
    exclude = ("source_kind",)  # which of source.kafka and source.files is given

    def normalize(self, item: Any, path: DocPath, document: Document) -> dict[str, Any]:
        form = super().normalize(item, path, document)
        problems: list[ConfigProblem] = []
        source = item.get("source")
        if not isinstance(source, dict) or not (form["source.kafka"] or form["source.files"]):
            problems.append(
                document.problem((*path, "source"), "give the source as {kafka: TOPIC} or {files: GLOB, format: ...}")
            )
        elif form["source.kafka"] and form["source.files"]:
            problems.append(document.problem((*path, "source"), "a source is kafka or files, not both"))
        elif form["source.kafka"] and "format" in source:
            problems.append(document.problem((*path, "source", "format"), "format is for a files source"))
        if problems:
            raise ConfigError(problems)
        return form

    def read(self, row: Any) -> dict[str, Any]:
        form = super().read(row)
        if row.source_kind == Pipeline.SourceKind.KAFKA:
            # A Kafka source has no format (the admin may have left one): not written, not compared.
            form["source.format"] = self.default(next(spec for spec in self.fields if spec.key == "source.format"))
        return form

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        kind = Pipeline.SourceKind.FILES if values["source_files"] else Pipeline.SourceKind.KAFKA
        pipeline_upsert(name=key, source_kind=kind, **values)

    def delete(self, key: str) -> None:
        pipeline = Pipeline.objects.filter(name=key).first()
        if pipeline is not None:
            pipeline_delete(pipeline=pipeline)
