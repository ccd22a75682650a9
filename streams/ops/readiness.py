"""``/readyz``: whether this worker can serve streams now, dependency by dependency.

Each configured Kafka cluster (the environment's and every ``Cluster`` row), the
database and the channel layer are asked with a short timeout (the channel layer: whether
this worker's subscriptions are live, see ``streams.edge.authorization.subscription``); a cluster that does
not answer says why (``tls``, ``authentication``, ``unreachable``). Answers are
reused for a second, so a busy probe costs the dependencies little. ``/healthz``
stays the liveness check: it never asks anyone else. What it keeps between probes
lives in the worker's :class:`~streams.edge.runtime.WorkerRuntime`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connection

from common.database import DATABASE_AWAY, database_watch
from streams.clusters import cluster_access, clusters_configured
from streams.core.clusters import DEFAULT_CLUSTER, ClusterError, ClusterSpec
from streams.edge.runtime import WorkerRuntime
from streams.fanout.kafka import KafkaAccess, KafkaUnavailable

PROBE_SECONDS = 3.0
REUSE_SECONDS = 1.0


async def readiness(runtime: WorkerRuntime) -> dict[str, Any]:
    """``{"status": "ok"|"unavailable", "checks": {...}}``, asked at most once a second."""
    if runtime.draining:  # SIGTERM came: load balancers stop sending streams here at once
        return {"status": "unavailable", "checks": {"draining": {"status": "down", "detail": "stopping"}}}
    last = runtime.readiness_answer
    if last is not None and time.monotonic() - last[0] < REUSE_SECONDS:
        return last[1]
    database, clusters = await _database(runtime.default_cluster)
    checks: dict[str, Any] = {"database": database}
    checks["channel_layer"] = await _channel_layer(runtime)
    for cluster, state in zip(clusters, await asyncio.gather(*(_cluster(runtime, c) for c in clusters)), strict=True):
        checks[f"kafka:{cluster.name}"] = state
    ready = all(check["status"] == "ok" for check in checks.values())
    answer = {"status": "ok" if ready else "unavailable", "checks": checks}
    runtime.readiness_answer = (time.monotonic(), answer)
    return answer


async def _database(default: ClusterSpec) -> tuple[dict[str, Any], list[ClusterSpec]]:
    """The database's check and the clusters it configures (while it is away, the default cluster alone)."""

    def ask() -> list[ClusterSpec]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return clusters_configured(default)

    try:
        clusters = await asyncio.wait_for(database_sync_to_async(ask)(), PROBE_SECONDS)
    except Exception as exc:
        if isinstance(exc, DATABASE_AWAY):
            database_watch.failed(exc)  # logged once per outage, not per probe
        detail = f"{type(exc).__name__}: {exc}".strip() if str(exc) else f"no answer within {PROBE_SECONDS:.0f} s"
        return {"status": "down", "detail": detail.splitlines()[0][:300]}, [default]
    database_watch.answered()
    return {"status": "ok"}, clusters


async def _channel_layer(runtime: WorkerRuntime) -> dict[str, Any]:
    """Whether this worker's subscriptions are live: its heartbeat came back through its groups lately.

    Before any request started them, a message sent to ourselves and received back.
    """
    subscription = runtime.subscription_if_started()
    if subscription is not None:
        live, why = subscription.live()
        return {"status": "ok"} if live else {"status": "down", "detail": f"subscriptions not live: {why}"}
    layer = get_channel_layer()
    if layer is None:
        return {"status": "ok", "detail": "no channel layer configured"}
    try:
        channel = await layer.new_channel()
        await asyncio.wait_for(layer.send(channel, {"type": "sluice.readyz"}), PROBE_SECONDS)
        await asyncio.wait_for(layer.receive(channel), PROBE_SECONDS)
    except Exception as exc:
        return {"status": "down", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "ok"}


async def _cluster(runtime: WorkerRuntime, cluster: ClusterSpec) -> dict[str, Any]:
    try:
        access = _access(runtime, cluster)
        await asyncio.get_running_loop().run_in_executor(access.executor, access.ping, PROBE_SECONDS)
    except KafkaUnavailable as exc:
        return {"status": "down", "cause": exc.cause or "unreachable", "detail": str(exc)}
    except ClusterError as exc:
        return {"status": "down", "cause": "configuration", "detail": str(exc)}
    return {"status": "ok"}


def _access(runtime: WorkerRuntime, cluster: ClusterSpec) -> KafkaAccess:
    hubs = runtime.hubs_if_started()
    if hubs is not None:
        return hubs.cluster_access(None if cluster.name == DEFAULT_CLUSTER else cluster)
    # Kept for the next probe: a new access per probe would leak threads.
    found = runtime.probes.get(cluster)
    if found is None:
        found = runtime.probes[cluster] = cluster_access(cluster)
    return found
