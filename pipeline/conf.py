"""The pipeline app's settings and their defaults: ``from pipeline.conf import pipeline_settings``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from common.conf import app_settings


def _checkpoint_dir() -> str:
    return str(Path(settings.BASE_DIR) / "checkpoints")


@dataclass(frozen=True)
class PipelineSettings:
    # Spark master of `runpipeline` (`--master` overrides it).
    SPARK_MASTER: str = "local[*]"
    # Where pipelines without a checkpoint location of their own keep one (a directory per pipeline).
    PIPELINE_CHECKPOINT_DIR: str = field(default_factory=_checkpoint_dir)
    # The Spark driver's memory, and the level of Spark's own log.
    SPARK_DRIVER_MEMORY: str = "1g"
    SPARK_LOG_LEVEL: str = "ERROR"


pipeline_settings = app_settings(PipelineSettings)
