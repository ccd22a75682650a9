"""What a pipeline's Spark job is given: a :class:`PipelineSpec`, made from the model by the runner.

No Django import here: the job and Spark's Python workers load this module on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

KafkaFormat = Literal["python", "kafka"]
# The headers column of Kafka-shaped records.
HEADERS_TYPE = "array<struct<key: string, value: binary>>"


class PipelineError(RuntimeError):
    """The pipeline cannot run as configured, or its Spark query failed."""


@dataclass(frozen=True)
class PipelineSpec:
    """Everything the Spark job needs to know about a pipeline."""

    name: str
    bootstrap: str
    json_schema: Any
    sink_topic: str
    checkpoint_location: str
    source_topic: str = ""
    source_files: str = ""
    source_format: str = "json"
    sql: str = "SELECT * FROM input"
    key_field: str = ""
    header_fields: dict[str, str] = field(default_factory=dict)
    dead_letter_topic: str = ""
    trigger_seconds: int = 5
    # The cluster's other librdkafka properties (TLS, SASL), resolved: options of every Kafka read and write.
    kafka_properties: dict[str, str] = field(default_factory=dict)
    # A checkpoint outside the source topic's log: fail, earliest or latest; resets are noted in reset_log.
    on_offset_reset: str = "fail"
    reset_log: str = ""
    # The source topic's value format (its Topic row's): the Kafka source decodes values to JSON text.
    # The registry is as written (``${env.NAME}`` references are read by the workers); skipped
    # records (values that do not decode) are noted in skip_log.
    value_format: str = "text"
    value_avro_schema: str = ""
    registry: str = ""
    skip_log: str = ""

    def kafka_options(self, *, prefix_bootstrap: str) -> dict[str, str]:
        """The Kafka options of a read or write: the bootstrap under ``prefix_bootstrap``, the rest as ``kafka.*``."""
        return {prefix_bootstrap: self.bootstrap, **{f"kafka.{k}": v for k, v in self.kafka_properties.items()}}
