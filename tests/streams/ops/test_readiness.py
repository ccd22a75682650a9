"""``/readyz`` while the database is away: 503 naming it, the default Kafka cluster still asked."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError

from common.database import DatabaseWatch
from streams.core.clusters import ClusterSpec
from streams.edge.runtime import WorkerRuntime
from streams.ops.readiness import readiness


@pytest.mark.django_db(transaction=True)
async def test_the_database_away_is_named_with_its_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    def away(default: ClusterSpec) -> list[ClusterSpec]:
        raise OperationalError("connection refused\nIs the server running?")

    async def answering(runtime: WorkerRuntime, cluster: ClusterSpec) -> dict[str, Any]:
        return {"status": "ok"}

    watch = DatabaseWatch()
    monkeypatch.setattr("streams.ops.readiness.clusters_configured", away)
    monkeypatch.setattr("streams.ops.readiness._cluster", answering)
    monkeypatch.setattr("streams.ops.readiness.database_watch", watch)
    answer = await readiness(WorkerRuntime("127.0.0.1:9"))
    assert answer["status"] == "unavailable"
    assert answer["checks"]["database"] == {"status": "down", "detail": "OperationalError: connection refused"}
    assert answer["checks"]["kafka:default"] == {"status": "ok"}
    assert watch.away
