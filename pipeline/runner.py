"""Running a configured pipeline: its model turned into a job spec, its progress printed and recorded as a run."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streams.clusters import cluster_client, default_cluster, topic_cluster
from streams.core.clusters import ClusterError, ClusterSpec
from streams.core.formats.spec import REGISTRY_FORMATS, FormatError, RecordFormats
from streams.models import Topic

from .conf import pipeline_settings
from .job import pipeline_run, spark_session
from .models import Pipeline, PipelineRun
from .progress import BatchProgress, BatchTiming
from .schema_fetch import RegistryError
from .services import pipeline_run_finish, pipeline_run_offset_resets, pipeline_run_progress, pipeline_run_start
from .spec import KafkaFormat, PipelineError, PipelineSpec

logger = logging.getLogger("sluice.pipeline")


class WorkerNotes:
    """A file the Kafka source appends JSON lines to (it runs in Spark's Python workers, not here)."""

    prefix = "sluice-notes-"

    def __init__(self) -> None:
        handle, name = tempfile.mkstemp(prefix=self.prefix, suffix=".jsonl")
        os.close(handle)
        self.path = Path(name)
        self.seen = 0

    def new_notes(self) -> list[dict[str, Any]]:
        """The notes added since the last call."""
        lines = self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []
        notes = [json.loads(line) for line in lines[self.seen :]]
        self.seen = len(lines)
        return notes


class OffsetResets(WorkerNotes):
    """Where the Kafka source notes the partitions it reset."""

    prefix = "sluice-offset-resets-"

    def record(self, run: PipelineRun, report: Callable[[str], None]) -> None:
        """Count, log and report the resets noted since the last call, on ``run``."""
        notes = self.new_notes()
        for note in notes:
            message = (
                f"offset reset: topic {note['topic']} partition {note['partition']}: the checkpoint was at "
                f"{note['checkpoint']}, the log holds {note['low']} to {note['high']}; reading from {note['start']}"
            )
            logger.warning("pipeline %s: %s", run.pipeline.name, message)
            report(message)
        if notes:
            pipeline_run_offset_resets(run=run, count=self.seen)


class SkippedRecords(WorkerNotes):
    """Where the Kafka source notes the records it skipped because their values do not decode (one line a read)."""

    prefix = "sluice-skipped-"

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def record(self, run: PipelineRun, report: Callable[[str], None]) -> None:
        """Count, log and report the skipped records noted since the last call."""
        for note in self.new_notes():
            count = int(note["skipped"])
            self.total += count
            message = (
                f"skipped {count} record{'s' if count != 1 else ''} whose value does not decode: topic "
                f"{note['topic']} partition {note['partition']} offsets {note['first']} to {note['last']} "
                f"(first: {note['reason']})"
            )
            logger.warning("pipeline %s: %s", run.pipeline.name, message)
            report(message)


def source_formats(topic: str) -> RecordFormats:
    """How the source ``topic``'s values decode: its Topic row's value format, else text (values as they are).

    Keys are read as they are. The registry is as written (the topic's, else its cluster's);
    the environment must resolve its ``${env.NAME}`` references now, as the workers read them again.
    """
    row = Topic.objects.filter(name=topic).select_related("cluster").first()
    if row is None:
        return RecordFormats()
    try:
        formats = row.formats()
        value = RecordFormats(
            formats.value, registry=formats.registry if formats.value.name in REGISTRY_FORMATS else ""
        )
        if value.uses_registry:
            if not value.registry:
                raise FormatError("registry", f"its {value.value.name} values need a schema registry")
            value.registry_url(os.environ)
    except (FormatError, ClusterError) as exc:
        raise PipelineError(f"source topic {topic}: {exc}") from exc
    return value


def checkpoint_remove(location: str, report: Callable[[str], None]) -> None:
    """Start over: remove the checkpoint directory (a URL is not removed from here)."""
    if "://" in location and not location.startswith("file://"):
        raise PipelineError(f"--reset-checkpoint removes local checkpoints only; remove {location} yourself")
    path = Path(location.removeprefix("file://"))
    if path.exists():
        shutil.rmtree(path)
        report(f"checkpoint {path} removed: starting over")


def pipeline_checkpoint(pipeline: Pipeline, cluster: ClusterSpec) -> str:
    """The pipeline's checkpoint location: its own, or one per pipeline and per cluster it reads.

    Offsets of one cluster mean nothing on another: a pipeline pointed at another cluster
    (or a cluster rebuilt at another address) starts a checkpoint of its own.
    """
    if pipeline.checkpoint_location:
        return pipeline.checkpoint_location
    where = hashlib.sha256(cluster.bootstrap.encode()).hexdigest()[:12]
    directory = pipeline_settings.PIPELINE_CHECKPOINT_DIR
    if "://" in directory:  # hdfs://, s3a://, file:// (a Path would fold the scheme's two slashes into one)
        return f"{directory.rstrip('/')}/{pipeline.name}/{cluster.name}-{where}"
    return str(Path(directory) / pipeline.name / f"{cluster.name}-{where}")


def pipeline_spec(
    pipeline: Pipeline,
    client: dict[str, str],
    cluster: ClusterSpec,
    reset_log: str = "",
    formats: RecordFormats | None = None,
    skip_log: str = "",
) -> PipelineSpec:
    """What the Spark job needs from the model (the schema resolved, registry included).

    ``formats`` are the source topic's (:func:`source_formats`): how its values decode.
    """
    try:
        json_schema = pipeline.json_schema_resolved()
    except RegistryError as exc:
        raise PipelineError(str(exc)) from exc
    formats = formats or RecordFormats()
    return PipelineSpec(
        name=pipeline.name,
        bootstrap=client["bootstrap.servers"],
        kafka_properties={k: v for k, v in client.items() if k != "bootstrap.servers"},
        json_schema=json_schema,
        sink_topic=pipeline.sink_topic,
        checkpoint_location=pipeline_checkpoint(pipeline, cluster),
        on_offset_reset=pipeline.on_offset_reset,
        reset_log=reset_log,
        source_topic=pipeline.source_topic if pipeline.source_kind == Pipeline.SourceKind.KAFKA else "",
        source_files=pipeline.source_files if pipeline.source_kind == Pipeline.SourceKind.FILES else "",
        source_format=pipeline.source_format,
        sql=pipeline.sql,
        key_field=pipeline.key_field,
        header_fields=dict(pipeline.header_fields or {}),
        dead_letter_topic=pipeline.dead_letter_topic,
        trigger_seconds=pipeline.trigger_seconds,
        value_format=formats.value.name,
        value_avro_schema=formats.value.inline_schema,
        registry=formats.registry,
        skip_log=skip_log,
    )


def pipeline_enabled(name: str) -> Pipeline:
    """The enabled pipeline called ``name``, its schema with it; :class:`PipelineError` if there is none."""
    try:
        pipeline = Pipeline.objects.select_related("schema").get(name=name)
    except Pipeline.DoesNotExist:
        raise PipelineError(f"there is no pipeline called {name!r}") from None
    if not pipeline.enabled:
        raise PipelineError(f"pipeline {name!r} is disabled")
    return pipeline


def pipeline_cluster(pipeline: Pipeline) -> tuple[ClusterSpec, dict[str, str]]:
    """The Kafka of the pipeline's source topic (the default cluster for a file source) and its client settings.

    Secrets are resolved now; :class:`PipelineError` if the cluster cannot be reached as configured.
    """
    cluster = topic_cluster(pipeline.source_topic) if pipeline.source_topic else default_cluster()
    if not cluster.bootstrap:
        raise PipelineError("KAFKA_BOOTSTRAP_SERVERS is not set")
    try:
        return cluster, cluster_client(cluster)
    except ClusterError as exc:
        raise PipelineError(str(exc)) from exc


def pipeline_execute(
    name: str,
    *,
    once: bool,
    master: str | None = None,
    kafka_format: KafkaFormat = "python",
    report: Callable[[str], None] = print,
    reset_checkpoint: bool = False,
    timings: bool = False,
    spark_conf: Mapping[str, str] | None = None,
) -> None:
    """Run the pipeline called ``name``, printing each batch's counts and keeping them on a :class:`PipelineRun`.

    ``reset_checkpoint`` starts over on purpose: the checkpoint (a local directory) is removed first.
    ``timings`` also prints where each batch's time went (:class:`BatchTiming`); it is logged at DEBUG anyway.
    ``spark_conf`` is more Spark properties for the session (e.g. a cluster's executor settings).
    """
    pipeline = pipeline_enabled(name)
    cluster, client = pipeline_cluster(pipeline)
    kafka_source = pipeline.source_kind == Pipeline.SourceKind.KAFKA and bool(pipeline.source_topic)
    formats = source_formats(pipeline.source_topic) if kafka_source else RecordFormats()
    resets = OffsetResets()
    skipped = SkippedRecords()
    spec = pipeline_spec(
        pipeline, client, cluster, reset_log=str(resets.path), formats=formats, skip_log=str(skipped.path)
    )
    if reset_checkpoint:
        checkpoint_remove(spec.checkpoint_location, report)
    spark = spark_session(
        master or pipeline_settings.SPARK_MASTER,
        app_name=f"sluice-pipeline-{name}",
        driver_memory=pipeline_settings.SPARK_DRIVER_MEMORY,
        log_level=pipeline_settings.SPARK_LOG_LEVEL,
        conf=spark_conf,
    )
    run = pipeline_run_start(pipeline=pipeline, once=once)
    report(f"pipeline {name}: run {run.pk} started ({'once' if once else 'continuous'}, {kafka_format} Kafka format)")

    def on_batch_start(batch_id: int) -> None:
        report(f"batch {batch_id}: started")

    def on_batch(progress: BatchProgress) -> None:
        report(str(progress))
        resets.record(run, report)
        skipped.record(run, report)
        pipeline_run_progress(
            run=run,
            records_in=progress.records_in,
            records_valid=progress.records_valid,
            records_invalid=progress.records_invalid,
        )

    def on_timing(timing: BatchTiming) -> None:
        logger.debug("pipeline %s: %s", name, timing)
        if timings:
            report(str(timing))

    try:
        pipeline_run(
            spark,
            spec,
            once=once,
            kafka_format=kafka_format,
            on_batch=on_batch,
            on_batch_start=on_batch_start,
            on_timing=on_timing,
        )
    except Exception as exc:
        pipeline_run_finish(run=run, error=str(exc)[:10_000])
        raise
    finally:
        resets.record(run, report)
        resets.path.unlink(missing_ok=True)
        skipped.record(run, report)
        skipped.path.unlink(missing_ok=True)
    pipeline_run_finish(run=run)
    if skipped.total:
        report(f"pipeline {name}: {skipped.total} skipped in all (records whose value does not decode)")
    report(f"pipeline {name}: run {run.pk} finished")
