"""Pipeline fixtures: one SparkSession for the whole test session (it takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession with Sluice's Kafka data source registered, stopped at the end."""
    from pipeline.job import spark_session

    session = spark_session("local[2]", app_name="sluice-tests")
    yield session
    session.stop()


@pytest.fixture
def pipeline_kafka(kafka: Any, settings: Any) -> Any:
    """The test broker as the pipeline's Kafka (``settings.SLUICE``)."""
    settings.SLUICE = {**settings.SLUICE, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap}
    return kafka
