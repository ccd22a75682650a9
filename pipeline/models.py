"""Configuration of data pipelines (Spark jobs that validate, shape and route events) and their runs."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from common.models import Named, fields_shown
from streams.models import KAFKA_TOPIC_NAME, Schema


class Pipeline(Named):
    """Source -> JSON Schema check -> Spark SQL over ``input`` -> sink topic; invalid records to a dead-letter topic."""

    class SourceKind(models.TextChoices):
        KAFKA = "kafka", "Kafka topic"
        FILES = "files", "Files"

    class OffsetReset(models.TextChoices):
        FAIL = "fail", "fail the run (say how to reset)"
        EARLIEST = "earliest", "start at the log's start"
        LATEST = "latest", "start at the log's end"

    class FileFormat(models.TextChoices):
        JSON = "json", "JSON lines"
        CSV = "csv", "CSV with a header line"
        PARQUET = "parquet", "Parquet"

    source_kind = models.CharField(max_length=10, choices=SourceKind.choices, default=SourceKind.KAFKA)
    source_topic = models.CharField(
        max_length=249, blank=True, validators=[KAFKA_TOPIC_NAME], help_text="Kafka source: the topic read."
    )
    source_files = models.CharField(
        max_length=500, blank=True, help_text="Files source: a glob, e.g. /data/scores/*.json."
    )
    source_format = models.CharField(max_length=10, choices=FileFormat.choices, default=FileFormat.JSON)
    schema = models.ForeignKey(
        Schema,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="pipelines",
        help_text="The JSON Schema records must satisfy (or give one inline below).",
    )
    json_schema = models.JSONField(null=True, blank=True, help_text="Inline JSON Schema, instead of a named schema.")
    sql = models.TextField(
        default="SELECT * FROM input",
        help_text="Spark SQL over the view input (the schema's properties, plus _key, _topic, _partition, "
        "_offset, _timestamp). Output columns starting with _ are not written.",
    )
    key_field = models.CharField(max_length=200, blank=True, help_text="Output column used as the record key.")
    header_fields = models.JSONField(
        default=dict, blank=True, help_text='Header name to output column, e.g. {"league": "league"}.'
    )
    sink_topic = models.CharField(max_length=249, validators=[KAFKA_TOPIC_NAME])
    dead_letter_topic = models.CharField(
        max_length=249, blank=True, validators=[KAFKA_TOPIC_NAME], help_text="Blank: invalid records are dropped."
    )
    trigger_seconds = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1)], help_text="Micro-batch interval when running continuously."
    )
    checkpoint_location = models.CharField(
        max_length=500,
        blank=True,
        help_text="Directory (or URL) of Spark's checkpoint. Blank: one under SLUICE_PIPELINE_CHECKPOINT_DIR.",
    )
    on_offset_reset = models.CharField(
        max_length=10,
        choices=OffsetReset.choices,
        default=OffsetReset.FAIL,
        help_text="When the checkpoint's offsets are past the topic's end or before its start (topic recreated, "
        "retention, another cluster).",
    )
    enabled = models.BooleanField(default=True)

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if self.source_kind == self.SourceKind.KAFKA:
            if not self.source_topic:
                errors["source_topic"] = "A Kafka source needs a topic."
            if self.source_files:
                errors["source_files"] = "A Kafka source has a topic, not files."
        else:
            if not self.source_files:
                errors["source_files"] = "A files source needs a glob."
            if self.source_topic:
                errors["source_topic"] = "A files source has files, not a topic."
        if (self.schema_id is None) == (self.json_schema is None):
            errors["json_schema"] = "Name a schema or give one inline (one of the two)."
        elif self.json_schema is not None and not (
            isinstance(self.json_schema, dict) and isinstance(self.json_schema.get("properties"), dict)
        ):
            errors["json_schema"] = "Give a JSON Schema of an object with properties."
        if self.header_fields is None:
            self.header_fields = {}
        if not isinstance(self.header_fields, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in self.header_fields.items()
        ):
            errors["header_fields"] = 'Give an object of header names to column names, e.g. {"league": "league"}.'
        if self.dead_letter_topic and self.dead_letter_topic == self.sink_topic:
            errors["dead_letter_topic"] = "The dead-letter topic must differ from the sink."
        if self.source_topic and self.source_topic in (self.sink_topic, self.dead_letter_topic):
            errors["sink_topic"] = "Writing to the source topic would feed the pipeline its own output."
        if errors:
            raise ValidationError(errors)

    def json_schema_resolved(self) -> Any:
        """The JSON Schema in force: inline, the named schema's, or fetched from its registry."""
        if self.json_schema is not None:
            return self.json_schema
        assert self.schema is not None
        if self.schema.json_schema is not None:
            return self.schema.json_schema
        from .schema_fetch import registry_schema_fetch

        return registry_schema_fetch(self.schema.registry_url, self.schema.subject, self.schema.version)


class PipelineRun(models.Model):
    """One run of ``runpipeline``: when, how it ended and what went through it (updated after each batch)."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        INTERRUPTED = "interrupted", "interrupted (no end recorded)"

    pipeline = models.ForeignKey(Pipeline, related_name="runs", on_delete=models.CASCADE)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    once = models.BooleanField(default=False, help_text="Processed what was there and stopped.")
    batches = models.PositiveIntegerField(default=0)
    records_in = models.PositiveBigIntegerField(default=0)
    records_valid = models.PositiveBigIntegerField(default=0)
    records_invalid = models.PositiveBigIntegerField(default=0)
    offset_resets = models.PositiveIntegerField(
        default=0, help_text="Partitions whose checkpointed offset was outside the log and was reset."
    )
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started", "-id"]

    def __str__(self) -> str:
        return f"{self.pipeline} at {self.started:%Y-%m-%d %H:%M:%S}"


# The columns a run shows, in order: the admin's inline and the API list them from here.
PIPELINE_RUN_FIELDS = fields_shown(PipelineRun, exclude=("pipeline",))
