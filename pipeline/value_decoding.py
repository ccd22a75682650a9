"""The ``value`` column of a ``sluice-kafka`` read: values decoded by the source topic's format, or as they are.

No Django import here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping

from confluent_kafka import Message

from streams.core.formats.record import RecordDecoder
from streams.core.formats.registry import RegistryUnavailable
from streams.core.formats.spec import JSON, TEXT, FormatError, RecordFormats
from streams.core.records import Record
from streams.core.retry import RetryPolicy, call_retried

logger = logging.getLogger("sluice.pipeline")

# Options of a read's value format (lower case, as Spark hands option names over).
VALUE_FORMAT_OPTION = "value.format"
VALUE_AVRO_SCHEMA_OPTION = "value.avro_schema"
REGISTRY_OPTION = "registry"
# A registry that does not answer is waited for: first this long, doubling up to the maximum, for as long as it takes.
REGISTRY_RETRY = RetryPolicy((RegistryUnavailable,), first_seconds=0.5, max_seconds=10.0)


def value_formats(options: Mapping[str, str]) -> RecordFormats | None:
    """The formats a read decodes values by; None when values are read as they are.

    ``value.format`` is ``text`` (the default), ``json``, ``avro``, ``protobuf``, ``jsonschema``
    or ``avro-inline`` (the writer schema in ``value.avro_schema``, JSON text); the registry
    formats need ``registry``, a URL as written on the topic (``${env.NAME}`` references are
    read from the worker's environment when it decodes). ``json`` values are not decoded here:
    the pipeline's schema checks send a value that is not JSON to the dead-letter topic.
    Keys are read as they are. :class:`FormatError` names the option that cannot work.
    """
    name = options.get(VALUE_FORMAT_OPTION) or TEXT
    if name in (TEXT, JSON):
        return None
    try:
        formats = RecordFormats.of(
            name,
            value_schema=options.get(VALUE_AVRO_SCHEMA_OPTION) or None,
            registry=options.get(REGISTRY_OPTION) or "",
        )
    except FormatError as exc:
        option = {"value_format": VALUE_FORMAT_OPTION, "value_avro_schema": VALUE_AVRO_SCHEMA_OPTION}
        raise FormatError(option.get(exc.field, exc.field), f"{option.get(exc.field, exc.field)}: {exc}") from exc
    if formats.uses_registry and not formats.registry:
        raise FormatError(REGISTRY_OPTION, f"value format {name} needs the {REGISTRY_OPTION} option")
    return formats


def record_decoded(decoder: RecordDecoder, message: Message) -> Record:
    """``message`` decoded; while the schema registry does not answer, wait and try again (never skip it)."""
    try:
        return decoder.record(message)
    except RegistryUnavailable as exc:
        failed = exc

    def waiting(exc: Exception, delay: float) -> None:
        logger.warning(
            "topic %s partition %s offset %s: %s; trying again in %.1fs",
            decoder.topic,
            message.partition(),
            message.offset(),
            exc,
            delay,
        )

    return call_retried(lambda: decoder.record(message), REGISTRY_RETRY, on_retry=waiting, failed=failed)


class ValueDecoding:
    """The values of one partition read, decoded by the read's ``value.format``; the ones that do not decode counted.

    A value that does not decode (bytes that are not of the format, a schema id the
    registry does not know) is skipped: logged (``sluice.formats``, WARNING, with topic,
    partition, offset and reason, at most one line per topic every few seconds), counted,
    and noted in the ``skip_log`` file (if the read has one) when the read is done, one
    line per partition read, which the runner reports and logs after each batch.
    """

    def __init__(self, options: Mapping[str, str], topic: str, partition: int) -> None:
        formats = value_formats(options)
        self.decoder = RecordDecoder(topic, formats, os.environ) if formats is not None else None
        self.skip_log = options.get("skip_log", "")
        self.topic = topic
        self.partition = partition
        self.skipped = 0
        self.first_skipped = -1
        self.last_skipped = -1
        self.reason = ""

    def value(self, message: Message, offset: int) -> tuple[bool, bytes | None]:
        """``(True, value)`` with the value as the ``value`` column holds it, or ``(False, None)``: skip the record."""
        if self.decoder is None:
            return True, message.value()
        record = record_decoded(self.decoder, message)
        if record.problem is None:
            return True, record.value
        if not self.skipped:
            self.first_skipped, self.reason = offset, record.problem
        self.skipped += 1
        self.last_skipped = offset
        return False, None

    def note(self) -> None:
        """Add what was skipped to the ``skip_log`` file."""
        if self.skipped and self.skip_log:
            note = {
                "topic": self.topic,
                "partition": self.partition,
                "skipped": self.skipped,
                "first": self.first_skipped,
                "last": self.last_skipped,
                "reason": self.reason,
            }
            with open(self.skip_log, "a", encoding="utf-8") as log:
                log.write(json.dumps(note) + "\n")
