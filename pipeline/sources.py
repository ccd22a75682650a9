"""A pipeline's source as a stream of Kafka-shaped records: a Kafka topic (either Kafka format) or files."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .datasource import FORMAT_NAME
from .spec import HEADERS_TYPE, KafkaFormat, PipelineError, PipelineSpec
from .validation import schema_record_type
from .value_decoding import REGISTRY_OPTION, VALUE_AVRO_SCHEMA_OPTION, VALUE_FORMAT_OPTION


def source_stream(spark: SparkSession, spec: PipelineSpec, kafka_format: KafkaFormat) -> DataFrame:
    """The pipeline's source as a stream of Kafka-shaped records (key, value, headers, topic, partition, offset...)."""
    if spec.source_topic:
        if kafka_format == "kafka":
            if spec.value_format not in ("text", "json"):
                raise PipelineError(
                    f"pipeline {spec.name}: topic {spec.source_topic} has {spec.value_format} values, which only "
                    f"Sluice's Kafka source decodes: run it with --kafka-format python"
                )
            raw = (
                spark.readStream.format("kafka")
                .options(**spec.kafka_options(prefix_bootstrap="kafka.bootstrap.servers"))
                .option("failOnDataLoss", "true" if spec.on_offset_reset == "fail" else "false")
                .option("subscribe", spec.source_topic)
                .option("startingOffsets", "earliest")
                .option("includeHeaders", "true")
                .load()
            )
        else:
            raw = (
                spark.readStream.format(FORMAT_NAME)
                .options(**spec.kafka_options(prefix_bootstrap="bootstrap"))
                .option("topic", spec.source_topic)
                .option("pipeline", spec.name)
                .option("on_offset_reset", spec.on_offset_reset)
                .option("reset_log", spec.reset_log)
                .option(VALUE_FORMAT_OPTION, spec.value_format)
                .option(VALUE_AVRO_SCHEMA_OPTION, spec.value_avro_schema)
                .option(REGISTRY_OPTION, spec.registry)
                .option("skip_log", spec.skip_log)
                .load()
            )
        return raw.select(
            "key",
            "value",
            F.col("headers").cast(HEADERS_TYPE).alias("headers"),
            "topic",
            "partition",
            "offset",
            "timestamp",
        )
    return _files_stream(spark, spec)


def _files_stream(spark: SparkSession, spec: PipelineSpec) -> DataFrame:
    """Files as records: each JSON line, or each CSV or Parquet row turned into a JSON object, is a value."""
    reader = spark.readStream
    if spec.source_format == "json":
        frame = reader.format("text").load(spec.source_files)
        value = F.col("value")
    else:
        if spec.source_format == "csv":
            columns = _csv_schema(spark, spec)
            frame = reader.format("csv").option("header", "true").schema(columns).load(spec.source_files)
        elif spec.source_format == "parquet":
            try:
                inferred = spark.read.parquet(spec.source_files).schema
            except Exception as exc:
                raise PipelineError(f"cannot read the Parquet schema of {spec.source_files}: {exc}") from exc
            frame = reader.format("parquet").schema(inferred).load(spec.source_files)
        else:
            raise PipelineError(f"unknown file format {spec.source_format!r}")
        value = F.to_json(F.struct(*[F.col(f"`{name}`") for name in frame.columns]))
    return frame.select(
        F.lit(None).cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit(None).cast(HEADERS_TYPE).alias("headers"),
        F.col("_metadata.file_path").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.col("_metadata.file_modification_time").alias("timestamp"),
    )


def _csv_schema(spark: SparkSession, spec: PipelineSpec) -> StructType:
    """The columns of the CSV files' header line, typed as the schema says (arrays and objects as text).

    Spark maps a given schema onto CSV columns by position, so it follows the header of the
    files there now; files added later must share it. A cell that does not parse as its column's
    type is read as NULL and left out of the JSON value: ``required`` is what catches it.
    """
    from pyspark.sql.types import ArrayType, StringType, StructField

    try:
        header = spark.read.option("header", "true").csv(spec.source_files).columns
    except Exception as exc:
        raise PipelineError(f"cannot read the CSV header of {spec.source_files}: {exc}") from exc
    types = {f.name: f.dataType for f in schema_record_type(spec.json_schema).fields}
    return StructType(
        [
            StructField(
                name, StringType() if isinstance(types.get(name), ArrayType | StructType | None) else types[name]
            )
            for name in header
        ]
    )
