"""Noticing, on a hub's fetch thread, that its topic was deleted and created again (its offsets went back).

A topic created again under the same name starts its offsets at 0 again: the fetch
position of the old log lies past the new log's end, and the fetch would wait for
offsets that may never come. The signs are looked at per fetch error and per
watermark check (every 0.25 s), never per record:

- a partition's high watermark, as the fetch responses report it, went back, or the
  fetch waits past it while idle (tansu answers a fetch past the new end with no
  records and no error, and its high watermark says where the new log ends);
- a fetch error saying the position is out of range (Kafka's answer).

The topic's id (KIP-516) confirms it: a topic created again has a new one, while a
high watermark seen going back for a moment (a leader change) keeps it. A cluster
that gives no ids cannot confirm, so there the sign alone counts. While the topic
is missing (deleted, not created yet) the suspicion stays and each check asks again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

logger = logging.getLogger("sluice.kafka")

# The id a cluster reports for a topic it gives no id (base64 of 16 zero bytes).
_ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


class TopicIds:
    """Topic ids (KIP-516) of one cluster, asked with an admin client made on first use."""

    def __init__(self, client: Mapping[str, Any], timeout: float) -> None:
        self._client = dict(client)
        self._timeout = timeout
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()

    def lookup(self, topic: str) -> str | None:
        """The topic's id; None when the topic does not exist right now or the cluster does not say."""
        try:
            with self._lock:
                if self._admin is None:
                    self._admin = AdminClient(self._client)
                admin = self._admin
            described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=self._timeout)
        except Exception:  # missing (deleted, not created yet), or no answer: the caller asks again later
            return None
        found = str(described.topic_id) if described.topic_id is not None else ""
        return found if found and found != _ZERO_TOPIC_ID else None

    def close(self) -> None:
        with self._lock:
            self._admin = None


class RestartWatch:
    """Whether a topic's log started over, from the signs its fetch reports (fetch thread only)."""

    __slots__ = ("_cleared", "_highs", "_id_lookup", "_ids", "_suspect", "learned", "topic", "topic_id")

    def __init__(self, topic: str, id_lookup: Callable[[str], str | None]) -> None:
        self.topic = topic
        self._id_lookup = id_lookup
        # The topic's id when the fetch started (None: the cluster gives none).
        self.topic_id: str | None = None
        self.learned = False
        self._ids = False
        # Suspect partitions, with the (high watermark, position) that made them so.
        self._suspect: dict[int, tuple[int, int]] = {}
        # Per partition, the last (high watermark, position) the topic's unchanged id answered.
        self._cleared: dict[int, tuple[int, int]] = {}
        self._highs: dict[int, int] = {}

    def learn(self) -> None:
        """Note the topic's id (once the fetch has started; until then nothing is suspect)."""
        self.learned = True
        self.topic_id = self._id_lookup(self.topic)
        self._ids = self.topic_id is not None

    def highs_note(self, highs: dict[int, int], positions: dict[int, int], idle: bool) -> None:
        """Partitions whose high watermark went back, or that wait past it while the fetch is idle, are suspect.

        librdkafka may have moved the position to the new log's start itself (its
        ``auto.offset.reset`` after an out-of-range answer), so a watermark gone back
        counts whatever the position. Waiting past the watermark is a sign only while
        nothing arrives, and once per (watermark, position): some brokers report the last
        batch's base + 1 as the high watermark, so a quiet topic can show it for good.
        Without ids to confirm, only a watermark gone back below the position counts.
        """
        seen, ids, suspect, cleared = self._highs, self._ids, self._suspect, self._cleared
        for partition, high in highs.items():
            position = positions.get(partition, 0)
            went_back = high < seen.get(partition, -1) and (ids or high < position)
            waits_past = ids and idle and high < position and cleared.get(partition) != (high, position)
            if went_back or waits_past:
                suspect[partition] = (high, position)
        self._highs = {**seen, **highs}

    def error_note(self, partition: int | None) -> None:
        """A fetch error said the position of ``partition`` is out of range."""
        if partition is not None:
            self._suspect[partition] = (-1, -1)

    @property
    def suspect(self) -> bool:
        return bool(self._suspect)

    def recreated(self) -> tuple[str | None, str | None] | None:
        """``(old id, new id)`` if the topic was created anew (every partition starts over), else None.

        A suspicion the topic's unchanged id answers is dropped; one that cannot be
        answered yet (the topic is missing, the cluster does not answer) stays.
        """
        if not self._ids:
            self._suspect.clear()
            return (None, None)
        found = self._id_lookup(self.topic)
        if found is None:
            return None
        suspected, self._suspect = self._suspect, {}
        if found == self.topic_id:
            self._cleared.update(suspected)
            return None
        old, self.topic_id = self.topic_id, found
        self._cleared.clear()
        return (old, found)

    def check(self, consumer: Consumer, partitions: list[int], timeout: float) -> dict[int, int] | None:
        """If the topic was created anew: seek each partition to its new log's start, log it; those starts."""
        ids = self.recreated()
        if ids is None:
            return None
        starts: dict[int, int] = {}
        for partition in partitions:
            tp = TopicPartition(self.topic, partition)
            try:
                low, _ = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
            except KafkaException:
                low = 0  # a partition the new topic lacks: nothing to read there yet
            start = starts[partition] = max(low, 0)
            try:
                consumer.seek(TopicPartition(self.topic, partition, start))
            except KafkaException:  # not being fetched right now: assign it afresh
                consumer.incremental_unassign([tp])
                consumer.incremental_assign([TopicPartition(self.topic, partition, start)])
        self._highs = {}  # the new log's watermarks are the ones to compare from now on
        logger.warning(
            "topic %s was deleted and created again (id %s -> %s): reading its new log from offsets %s",
            self.topic,
            ids[0],
            ids[1],
            starts,
        )
        return starts
