"""A fetched Kafka message decoded once into a :class:`~streams.core.records.Record`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from streams.core.formats.decoders import field_decoder, json_check
from streams.core.formats.jsontext import json_compact, key_text
from streams.core.formats.registry import RegistryUnavailable, Undecodable
from streams.core.formats.spec import RecordFormats
from streams.core.records import Record

logger = logging.getLogger("sluice.formats")
# At most one "skipped a record that does not decode" line per topic per this many seconds.
LOG_INTERVAL_SECONDS = 10.0


class RecordDecoder:
    """Turns confluent-kafka messages of one topic into records, values and keys decoded by its formats.

    Values go out as compact JSON (``json`` values as they were written, once checked);
    decoded keys are what key filters compare with, while the record keeps the raw key
    bytes for its ids and ``delete`` events. A record that does not decode keeps its
    raw bytes and says why in ``problem``: it moves the stream's position but is never
    sent. Any other exception a decoder raises skips the record the same way, so a
    hostile record never stops a hub's fetch thread.
    :class:`~streams.core.formats.registry.RegistryUnavailable` propagates: the
    caller waits and tries the message again.
    """

    def __init__(self, topic: str, formats: RecordFormats, environ: Mapping[str, str]) -> None:
        self.topic = topic
        self.formats = formats
        url = formats.registry_url(environ) if formats.uses_registry else ""
        self._value = field_decoder(formats.value, topic, "value", url)
        self._key = field_decoder(formats.key, topic, "key", url)
        self._value_passes = self._value is json_check
        self._logged_at = -LOG_INTERVAL_SECONDS
        self._unlogged = 0

    def record(self, message: Any) -> Record:
        key: bytes | None = message.key()
        value: bytes | None = message.value()
        match_key: bytes | None = None
        problem: str | None = None
        try:
            if key is not None and self._key is not None:
                match_key = key_text(self._key(key))
            if value is not None and self._value is not None:
                decoded = self._value(value)
                if not self._value_passes:
                    value = json_compact(decoded)
        except Undecodable as exc:
            problem = str(exc)
        except RegistryUnavailable:
            raise
        except Exception as exc:  # what no decoder expected (a value its JSON cannot render): skipped too
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            self._skipped_log(message, problem)
        return Record(
            message.partition(),
            message.offset(),
            message.timestamp()[1],
            key,
            value,
            message.headers(),
            match_key,
            problem,
        )

    def _skipped_log(self, message: Any, problem: str) -> None:
        now = time.monotonic()
        if now - self._logged_at < LOG_INTERVAL_SECONDS:
            self._unlogged += 1
            return
        more = f" (and {self._unlogged} more since the last report)" if self._unlogged else ""
        logger.warning(
            "skipped a record that does not decode: topic=%s partition=%s offset=%s reason=%s%s",
            self.topic,
            message.partition(),
            message.offset(),
            problem,
            more,
        )
        self._logged_at = now
        self._unlogged = 0
