"""Configured topics in Kafka: whether each exists in its cluster, and creating it when someone asks.

Sluice never creates a topic by itself, not on save and not when a stream asks
for it (a misspelt route must not make one): the admin's "Create in Kafka"
action, ``POST /api/topics/{name}/create/`` and ``applyconfig --create-topics``
do, with the row's partitions, replication factor and configs.

The state is read for pages people wait on: one metadata request and one
offsets request per cluster, every cluster at once, within a short budget, and
the answer is reused for a few seconds. A cluster that does not answer in time
(or cannot be connected to as written) makes its topics ``unknown``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from streams.clusters import cluster_client, topic_row_cluster
from streams.core.clusters import ClusterError, ClusterSpec
from streams.models import Topic

EXISTS = "exists"
MISSING = "missing"
UNKNOWN = "unknown"
# A page waits at most this long for all its clusters together.
STATE_SECONDS = 2.5
# An answer (a cluster's failure too) is reused this long, so reloading a page asks Kafka again only now and then.
STATE_CACHE_SECONDS = 5.0
CREATE_SECONDS = 10.0
# librdkafka's own errors for a cluster that did not answer (not an answer from Kafka).
_UNAVAILABLE = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic as its cluster sees it; ``reason`` says why the state is ``unknown``."""

    topic: str
    cluster: str
    state: str
    partitions: int | None = None
    end_offsets: tuple[int, ...] | None = None  # by partition; None when Kafka did not say
    reason: str = ""

    @property
    def summary(self) -> str:
        """One line for a page or a terminal: ``exists: 3 partitions, end offsets 0:12 1:0 2:7``."""
        if self.state == EXISTS:
            plural = "" if self.partitions == 1 else "s"
            offsets = self.end_offsets
            ends = "" if offsets is None else ", end offsets " + " ".join(f"{p}:{o}" for p, o in enumerate(offsets))
            return f"exists: {self.partitions} partition{plural}{ends}"
        if self.state == MISSING:
            return f"missing from cluster {self.cluster}"
        return f"unknown (cluster {self.cluster} unreachable: {self.reason})"

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cluster": self.cluster,
            "state": self.state,
            "partitions": self.partitions,
            "end_offsets": list(self.end_offsets) if self.end_offsets is not None else None,
            "reason": self.reason,
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class ClusterTopics:
    """What one cluster answered about some topics: partitions and end offsets by topic, or why nothing."""

    partitions: dict[str, int] = field(default_factory=dict)
    end_offsets: dict[str, tuple[int, ...]] = field(default_factory=dict)
    reason: str = ""  # set when the cluster did not answer

    def state(self, topic: str, cluster: str) -> TopicState:
        if self.reason:
            return TopicState(topic, cluster, UNKNOWN, reason=self.reason)
        if topic not in self.partitions:
            return TopicState(topic, cluster, MISSING)
        return TopicState(topic, cluster, EXISTS, self.partitions[topic], self.end_offsets.get(topic))


class _AnswerCache:
    """Clusters' recent answers, by cluster and the topics asked about, for :data:`STATE_CACHE_SECONDS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[tuple[ClusterSpec, frozenset[str]], tuple[float, ClusterTopics]] = {}

    def get(self, key: tuple[ClusterSpec, frozenset[str]]) -> ClusterTopics | None:
        with self._lock:
            found = self._answers.get(key)
        return found[1] if found is not None and time.monotonic() - found[0] < STATE_CACHE_SECONDS else None

    def put(self, key: tuple[ClusterSpec, frozenset[str]], answer: ClusterTopics) -> None:
        now = time.monotonic()
        with self._lock:
            self._answers = {k: v for k, v in self._answers.items() if now - v[0] < STATE_CACHE_SECONDS}
            self._answers[key] = (now, answer)

    def forget(self, cluster: ClusterSpec) -> None:
        with self._lock:
            self._answers = {k: v for k, v in self._answers.items() if k[0] != cluster}


_answers = _AnswerCache()


def _admin(cluster: ClusterSpec) -> AdminClient:
    """An admin client for ``cluster`` (``ClusterError`` if it cannot be made as written)."""
    client = cluster_client(cluster)
    if not client.get("bootstrap.servers", "").strip():
        raise ClusterError("no bootstrap servers (KAFKA_BOOTSTRAP_SERVERS is empty and no embedded broker runs)")
    # librdkafka's own log would repeat every failed connection on stderr; the state says it once.
    return AdminClient({**client, "log_level": 0})


def _kafka_reason(exc: BaseException) -> str:
    """Kafka's reason, without librdkafka's wrapping; never a secret (clients do not echo their settings)."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(error, KafkaError):
        return str(error.str())
    return str(exc) or type(exc).__name__


def _cluster_ask(cluster: ClusterSpec, topics: frozenset[str], deadline: float) -> ClusterTopics:
    """Partitions of ``topics`` and their end offsets, in one metadata and one offsets request."""
    try:
        admin = _admin(cluster)
        # All topics, never one by name: a broker with auto.create.topics.enable would create a topic
        # that a metadata request names.
        metadata = admin.list_topics(timeout=max(deadline - time.monotonic(), 0.1))
    except (ClusterError, KafkaException) as exc:
        return ClusterTopics(reason=_kafka_reason(exc))
    partitions = {name: len(metadata.topics[name].partitions) for name in topics if name in metadata.topics}
    wanted = {
        TopicPartition(name, partition): OffsetSpec.latest()
        for name, count in partitions.items()
        for partition in range(count)
    }
    ends: dict[str, list[int]] = {name: [0] * count for name, count in partitions.items()}
    missing_ends: set[str] = set()
    if wanted:
        remaining = max(deadline - time.monotonic(), 0.1)
        try:
            asked = admin.list_offsets(wanted, request_timeout=remaining)
        except KafkaException:
            return ClusterTopics(partitions)  # the topics exist; their end offsets are not known
        for partition, future in asked.items():
            try:
                ends[partition.topic][partition.partition] = future.result(timeout=remaining).offset
            except (KafkaException, FutureTimeout):
                missing_ends.add(partition.topic)
    end_offsets = {name: tuple(offsets) for name, offsets in ends.items() if name not in missing_ends}
    return ClusterTopics(partitions, end_offsets)


def topic_states(topics: Iterable[tuple[str, ClusterSpec]], *, budget: float = STATE_SECONDS) -> dict[str, TopicState]:
    """The state of each ``(topic, cluster)``, asking every cluster at once and waiting at most ``budget`` seconds."""
    by_cluster: dict[ClusterSpec, set[str]] = {}
    for name, cluster in topics:
        by_cluster.setdefault(cluster, set()).add(name)
    answers: dict[ClusterSpec, ClusterTopics] = {}
    asking = {}
    for cluster, names in by_cluster.items():
        cached = _answers.get((cluster, frozenset(names)))
        if cached is not None:
            answers[cluster] = cached
        else:
            asking[cluster] = frozenset(names)
    if asking:
        deadline = time.monotonic() + budget
        # Not a with-block: leaving one waits for every thread, and a cluster that overruns must not hold the page.
        pool = ThreadPoolExecutor(max_workers=len(asking), thread_name_prefix="topic-state")
        futures = {cluster: pool.submit(_cluster_ask, cluster, names, deadline) for cluster, names in asking.items()}
        pool.shutdown(wait=False)
        for cluster, future in futures.items():
            try:
                answer = future.result(timeout=max(deadline - time.monotonic(), 0) + 0.2)
            except FutureTimeout:
                answer = ClusterTopics(reason=f"no answer within {budget:g} s")
            except Exception as exc:  # whatever the client raised, the page shows it rather than failing
                answer = ClusterTopics(reason=_kafka_reason(exc))
            _answers.put((cluster, asking[cluster]), answer)
            answers[cluster] = answer
    return {name: answers[cluster].state(name, cluster.name) for cluster, names in by_cluster.items() for name in names}


def topic_rows_state(topics: Iterable[Topic], *, budget: float = STATE_SECONDS) -> dict[str, TopicState]:
    """The state of configured topics (rows fetched with their cluster), by name."""
    return topic_states(((topic.name, topic_row_cluster(topic)) for topic in topics), budget=budget)


def topic_names_state(names: Iterable[str], *, budget: float = STATE_SECONDS) -> dict[str, TopicState]:
    """The state of topics by name: on their row's cluster if configured, else on the environment's."""
    wanted = set(names)
    rows = {topic.name: topic for topic in Topic.objects.filter(name__in=wanted).select_related("cluster")}
    return topic_states(((name, topic_row_cluster(rows.get(name))) for name in wanted), budget=budget)


class TopicCreateError(Exception):
    """Kafka refused to create a topic, or did not answer: the message names the topic and Kafka's reason.

    ``cause`` is ``refused`` (Kafka's answer), ``unavailable`` (no answer in time) or ``configuration``
    (the cluster cannot be connected to as written).
    """

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """A topic created (``created``), or found to exist already; ``message`` says which, for a person."""

    topic: str
    cluster: str
    created: bool
    message: str


def _config_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def topic_create(topic: Topic, *, timeout: float = CREATE_SECONDS) -> TopicCreation:
    """Create ``topic`` in its cluster with its partitions, replication factor and configs.

    A topic that exists already is not an error: it is left as it is, and the answer says so.
    """
    cluster = topic_row_cluster(topic)
    where = f"topic {topic.name} on cluster {cluster.name}"
    new = NewTopic(
        topic.name,
        num_partitions=topic.partitions or -1,  # -1: the broker's default
        replication_factor=topic.replication_factor or -1,
        config={name: _config_value(value) for name, value in (topic.configs or {}).items()},
    )
    try:
        admin = _admin(cluster)
        future = admin.create_topics([new], request_timeout=timeout)[topic.name]
        future.result(timeout=timeout + 1)
    except ClusterError as exc:
        raise TopicCreateError(f"Cannot create {where}: {exc}", "configuration") from exc
    except FutureTimeout as exc:
        raise TopicCreateError(
            f"Cannot create {where}: the cluster did not answer within {timeout:g} s", "unavailable"
        ) from exc
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return TopicCreation(
                topic.name, cluster.name, False, f"{where.capitalize()} exists already in Kafka: left as it is"
            )
        if isinstance(error, KafkaError) and error.code() in _UNAVAILABLE:
            raise TopicCreateError(f"Cannot create {where}: {_kafka_reason(exc)}", "unavailable") from exc
        raise TopicCreateError(f"Kafka refused to create {where}: {_kafka_reason(exc)}", "refused") from exc
    finally:
        _answers.forget(cluster)
    made = f"{topic.partitions} partition{'' if topic.partitions == 1 else 's'}" if topic.partitions else ""
    detail = f" ({made})" if made else " (the broker's default partitions)"
    return TopicCreation(topic.name, cluster.name, True, f"Created {where} in Kafka{detail}")
