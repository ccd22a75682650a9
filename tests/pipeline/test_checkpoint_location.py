"""Checkpoints on a cluster: a shared or distributed filesystem's URL as the checkpoint directory."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.models import Pipeline
from pipeline.runner import pipeline_checkpoint
from streams.core.clusters import ClusterSpec


@pytest.mark.parametrize(
    ("directory", "start"),
    [
        ("hdfs://namenode:8020/sluice/checkpoints", "hdfs://namenode:8020/sluice/checkpoints/scores/prod-"),
        ("s3a://bucket/checkpoints/", "s3a://bucket/checkpoints/scores/prod-"),
        ("file:///mnt/shared/checkpoints", "file:///mnt/shared/checkpoints/scores/prod-"),
        ("/mnt/shared/checkpoints", "/mnt/shared/checkpoints/scores/prod-"),
    ],
)
def test_a_checkpoint_directory_url_keeps_its_scheme(settings: Any, directory: str, start: str) -> None:
    settings.SLUICE = {**settings.SLUICE, "PIPELINE_CHECKPOINT_DIR": directory}
    location = pipeline_checkpoint(Pipeline(name="scores"), ClusterSpec.of("prod", "kafka-1:9092"))
    assert location.startswith(start)
    assert "//" not in location.removeprefix(start.split("/")[0] + "//")
