"""The Kafka clusters this process reaches: the environment's (the default), and the ones configured.

The default cluster is ``KAFKA_BOOTSTRAP_SERVERS`` with the client properties of
every other ``KAFKA_*`` variable (or the embedded broker ``runstreams`` started,
given to the worker's runtime).
Other clusters are :class:`~streams.models.Cluster` rows, named by their topics.
Secret values are ``${env.NAME}`` references in both, and :func:`cluster_client`
is the one place they are read from the environment: when a client is made.
"""

from __future__ import annotations

import os
from contextvars import ContextVar

from streams.conf import streams_settings
from streams.core.clusters import DEFAULT_CLUSTER, ClusterSpec
from streams.core.formats.record import RecordDecoder
from streams.core.formats.spec import RecordFormats
from streams.fanout.diagnosis import ClusterDiagnosis
from streams.fanout.kafka import KafkaAccess
from streams.models import Cluster, Topic

# The default cluster of the worker serving the current request (its runtime's: the embedded broker's
# when runstreams started one), set by the stream router around the Django views it passes requests to,
# so the admin and the API look at the cluster the worker streams from. Unset: the environment's.
worker_default_cluster: ContextVar[ClusterSpec | None] = ContextVar("worker_default_cluster", default=None)


def default_cluster(bootstrap: str = "") -> ClusterSpec:
    """The cluster of topics that name none: the environment's, or an embedded broker's.

    ``bootstrap``: the embedded broker ``runstreams`` started (plain, so none of the
    environment's client properties), unless it is the environment's own. Without it,
    the cluster of the worker serving the current request, if any.
    """
    if not bootstrap:
        serving = worker_default_cluster.get()
        if serving is not None:
            return serving
    if bootstrap and bootstrap != streams_settings.KAFKA_BOOTSTRAP_SERVERS:
        return ClusterSpec.of(DEFAULT_CLUSTER, bootstrap, {})
    return ClusterSpec.of(DEFAULT_CLUSTER, streams_settings.KAFKA_BOOTSTRAP_SERVERS, streams_settings.KAFKA_PROPERTIES)


def cluster_client(cluster: ClusterSpec) -> dict[str, str]:
    """The cluster's librdkafka settings with ``${env.NAME}`` resolved now (``ClusterError`` names a missing one)."""
    return cluster.client_config(os.environ)


def record_decoder(topic: str, formats: RecordFormats) -> RecordDecoder:
    """The decoder of ``topic``'s records, its registry's ``${env.NAME}`` references resolved now."""
    return RecordDecoder(topic, formats, os.environ)


def cluster_access(cluster: ClusterSpec) -> KafkaAccess:
    """Look-ups, fetches and catch-up reads for ``cluster``, with a diagnosis of its failures."""
    client = cluster_client(cluster)
    tls = "SSL" in str(client.get("security.protocol", "")).upper()
    return KafkaAccess(
        client,
        timeout=streams_settings.KAFKA_TIMEOUT,
        backlog_readers=streams_settings.BACKLOG_READERS,
        fetch_linger_seconds=streams_settings.FETCH_LINGER_MS / 1000,
        fetch_wait_ms=streams_settings.FETCH_WAIT_MS or None,
        diagnosis=ClusterDiagnosis(cluster.name, tls_configured=tls),
    )


def topic_cluster(topic: str) -> ClusterSpec:
    """The cluster ``topic`` lives on (its row's, else the default one)."""
    return topic_row_cluster(Topic.objects.filter(name=topic).select_related("cluster").first())


def topic_row_cluster(row: Topic | None) -> ClusterSpec:
    """The cluster a topic row names, else (no row, or a row naming none) the default one."""
    return row.cluster.spec() if row is not None and row.cluster is not None else default_cluster()


def clusters_configured(default: ClusterSpec | None = None) -> list[ClusterSpec]:
    """The default cluster (``default``, else the environment's) and every configured one."""
    return [default or default_cluster(), *(cluster.spec() for cluster in Cluster.objects.order_by("name"))]
