"""Writes to pipeline configuration and run records: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from typing_extensions import Unpack

from common.upsert import model_upsert
from streams.models import Schema

from .models import Pipeline, PipelineRun


class PipelineFields(TypedDict, total=False):
    """The columns of a pipeline an upsert sets (a column left out keeps its value, or its default on a new row)."""

    description: str
    source_kind: str
    source_topic: str
    source_files: str
    source_format: str
    schema: Schema | str | None  # by name: Schema.DoesNotExist if there is none
    json_schema: dict[str, Any] | None
    sql: str
    key_field: str
    header_fields: dict[str, str]
    sink_topic: str
    dead_letter_topic: str
    trigger_seconds: int
    checkpoint_location: str
    on_offset_reset: str
    enabled: bool


@transaction.atomic
def pipeline_upsert(*, name: str, **fields: Unpack[PipelineFields]) -> Pipeline:
    """Create or update the pipeline called ``name`` (validated like the admin form).

    ``schema`` may be a :class:`Schema`, its name (``Schema.DoesNotExist`` if there is none) or None.
    """
    schema = fields.get("schema")
    if isinstance(schema, str):
        fields["schema"] = Schema.objects.get(name=schema)
    return model_upsert(Pipeline, {"name": name}, fields)


@transaction.atomic
def pipeline_delete(*, pipeline: Pipeline) -> None:
    """Delete the pipeline and its run records."""
    pipeline.delete()


def pipeline_run_start(*, pipeline: Pipeline, once: bool) -> PipelineRun:
    """Record a new run; runs of the pipeline still marked running ended without saying so."""
    pipeline.runs.filter(status=PipelineRun.Status.RUNNING).update(status=PipelineRun.Status.INTERRUPTED)
    return PipelineRun.objects.create(pipeline=pipeline, once=once)


def pipeline_run_progress(*, run: PipelineRun, records_in: int, records_valid: int, records_invalid: int) -> None:
    """Add one batch's counts to the run."""
    PipelineRun.objects.filter(pk=run.pk).update(
        batches=F("batches") + 1,
        records_in=F("records_in") + records_in,
        records_valid=F("records_valid") + records_valid,
        records_invalid=F("records_invalid") + records_invalid,
    )


def pipeline_run_offset_resets(*, run: PipelineRun, count: int) -> None:
    """How many partitions this run found outside the log and reset (on_offset_reset earliest or latest)."""
    PipelineRun.objects.filter(pk=run.pk).update(offset_resets=count)


def pipeline_run_finish(*, run: PipelineRun, error: str = "") -> None:
    """Record how the run ended."""
    status = PipelineRun.Status.FAILED if error else PipelineRun.Status.SUCCEEDED
    PipelineRun.objects.filter(pk=run.pk).update(status=status, finished=timezone.now(), error=error)
