"""Build and run a pipeline's Spark job: source -> JSON Schema checks -> SQL over ``input`` -> sink and dead letters.

Each micro-batch (``foreachBatch``) is validated once and kept in memory, counted per rule,
its valid records shaped by the pipeline's SQL and written to the sink, its invalid ones
written as they came to the dead-letter topic with headers naming the rule and the source
record. Offsets are in Spark's checkpoint and are committed after the batch's writes: a job
killed mid-batch repeats that batch when restarted (at-least-once, see docs/pipeline.md).

The job is given a :class:`~pipeline.spec.PipelineSpec` (:func:`pipeline.runner.pipeline_spec` makes it from
the model), reads by :mod:`pipeline.sources` and reports by :mod:`pipeline.progress`. No Django import here either.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from .checkpoint import batch_replayed
from .datasource import KafkaDataSource
from .kafka_write import PRODUCED_COUNT_SCHEMA, batches_produce_counted
from .progress import BatchProgress, BatchTiming, TimingListener
from .shipping import ROOT, executor_code_zip, master_is_local
from .sources import source_stream
from .spec import HEADERS_TYPE, KafkaFormat, PipelineError, PipelineSpec
from .stopping import BatchEndStop, stop_signals_caught
from .validation import RULE_COLUMN, schema_record_type, schema_validation

# Headers a dead letter carries on top of the record's own.
RULE_HEADER = "sluice.rule"
TOPIC_HEADER = "sluice.topic"
PARTITION_HEADER = "sluice.partition"
OFFSET_HEADER = "sluice.offset"
METADATA_COLUMNS = ("_key", "_topic", "_partition", "_offset", "_timestamp")
# How often the driver looks for a stop signal while the query runs; how long a batch may take to end
# once one is seen, on top of the trigger interval (see pipeline.stopping).
STOP_POLL_SECONDS = 0.2
STOP_BATCH_SECONDS = 1.0


def spark_session(
    master: str,
    app_name: str = "sluice-pipeline",
    *,
    driver_memory: str = "1g",
    log_level: str = "ERROR",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The SparkSession of this process (created on first use) with the Kafka data source registered.

    ``conf`` is more Spark properties (``--conf`` of ``runpipeline``). On a cluster master the
    executors get the project code they import as a zip (:mod:`pipeline.shipping`).
    """
    local = master_is_local(master)
    # Spark starts its Python workers (tasks, data source planning) from the JVM's environment, which
    # the JVM takes from this process: they must run this interpreter and import this project's modules.
    # Not configuration: plumbing for Spark's children, set before the JVM starts. On a cluster the
    # executors run the interpreter named here too: one already given (a packed environment's) is kept.
    if local or "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    if not local:
        # Before the data source is registered: each Python function sent to the executors names
        # the files added so far, and their workers put those on their path.
        session.sparkContext.addPyFile(str(executor_code_zip()))
    session.dataSource.register(KafkaDataSource)
    return session


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


class BatchPlan:
    """Every column a micro-batch's plan uses, built once for the query and applied to each batch.

    A column is a JVM object made over py4j: the validation alone takes some 900 round trips for
    a small schema, which each batch would otherwise pay on the driver before its first task.
    """

    def __init__(self, spec: PipelineSpec) -> None:
        """Raises :class:`~pipeline.validation.SchemaError` if the schema cannot give the ``input`` view's columns."""
        self.spec = spec
        record_type = schema_record_type(spec.json_schema)
        self.validation = schema_validation(spec.json_schema)
        rule = F.col(RULE_COLUMN)
        self.valid, self.invalid = rule.isNull(), rule.isNotNull()
        self.counts = (F.count(F.lit(1)).alias("records"), F.count(rule).alias("invalid"))
        self.shape = (
            F.from_json(F.col("value").cast("string"), record_type).alias("_data"),
            F.col("key").cast("string").alias("_key"),
            F.col("topic").alias("_topic"),
            F.col("partition").alias("_partition"),
            F.col("offset").alias("_offset"),
            F.col("timestamp").alias("_timestamp"),
        )
        self.letters = (
            F.col("key"),
            F.col("value"),
            F.concat(
                F.coalesce(F.col("headers"), F.array().cast(HEADERS_TYPE)),
                F.array(
                    _header(RULE_HEADER, rule),
                    _header(TOPIC_HEADER, F.col("topic")),
                    _header(PARTITION_HEADER, F.col("partition")),
                    _header(OFFSET_HEADER, F.col("offset")),
                ),
            ).alias("headers"),
            F.lit(spec.dead_letter_topic).alias("topic"),
        )
        self.sink_by_columns: dict[tuple[str, ...], tuple[Column, ...]] = {}

    def records_checked(self, batch: DataFrame, counted: Observation) -> DataFrame:
        """The batch with ``_rule`` (NULL: valid), its records and invalid ones counted into ``counted``."""
        return self.validation.apply(batch).observe(counted, *self.counts)

    def records_shaped(self, checked: DataFrame) -> DataFrame:
        """Valid records as the ``input`` view: the schema's properties as typed columns, plus ``_key`` and friends."""
        return checked.filter(self.valid).select(*self.shape).select("_data.*", *METADATA_COLUMNS)

    def sink_records(self, output: DataFrame) -> DataFrame:
        """The SQL's output as Kafka records: JSON of the columns not starting with ``_``, key and headers by column."""
        columns = tuple(output.columns)
        if columns not in self.sink_by_columns:
            self.sink_by_columns[columns] = self.sink_columns(columns)
        return output.select(*self.sink_by_columns[columns])

    def sink_columns(self, columns: tuple[str, ...]) -> tuple[Column, ...]:
        spec = self.spec
        missing = [c for c in [spec.key_field, *spec.header_fields.values()] if c and c not in columns]
        if missing:
            raise PipelineError(f"the SQL of {spec.name} has no column {missing[0]!r} (columns: {', '.join(columns)})")
        written = [F.col(f"`{c}`") for c in columns if not c.startswith("_")]
        key = F.col(f"`{spec.key_field}`").cast("string").cast("binary") if spec.key_field else F.lit(None)
        headers = [_header(name, F.col(f"`{column}`")) for name, column in spec.header_fields.items()]
        return (
            key.cast("binary").alias("key"),
            F.to_json(F.struct(*written)).cast("binary").alias("value"),
            (F.array(*headers) if headers else F.lit(None)).cast(HEADERS_TYPE).alias("headers"),
            F.lit(spec.sink_topic).alias("topic"),
        )

    def dead_letter_records(self, checked: DataFrame) -> DataFrame:
        """Invalid records as they came, with headers naming the failed rule and where the record was read."""
        return checked.filter(self.invalid).select(*self.letters)


def records_write(records: DataFrame, spec: PipelineSpec, kafka_format: KafkaFormat) -> int | None:
    """Produce ``records`` (key, value, headers, topic) with the selected Kafka format; how many, where known.

    The Python format produces from the tasks themselves (``mapInArrow``, on Spark's reused Python
    workers): every record is acknowledged by the broker before the job ends, as with the data
    source's writer, without the writer's planning and commit round trips on each micro-batch.
    """
    if kafka_format == "kafka":
        records.write.format("kafka").options(**spec.kafka_options(prefix_bootstrap="kafka.bootstrap.servers")).save()
        return None
    produce = functools.partial(batches_produce_counted, spec.kafka_options(prefix_bootstrap="bootstrap"))
    return sum(row[0] for row in records.mapInArrow(produce, PRODUCED_COUNT_SCHEMA).collect())


def batch_process(batch: DataFrame, batch_id: int, plan: BatchPlan, kafka_format: KafkaFormat) -> BatchProgress:
    """Validate, shape and write one micro-batch; returns its counts.

    Valid records (to the sink) and dead letters go out in one Spark job, each row naming its topic.
    That job also counts the batch's records and invalid ones as it validates them (an observation
    on the validated batch, which is kept in memory for the write's two branches); only a batch with
    invalid records runs a second job, over the kept batch, to count them by rule.
    """
    spec = plan.spec
    counted = Observation(f"sluice_rules_{batch_id}")
    checked = plan.records_checked(batch, counted).persist()
    try:
        plan.records_shaped(checked).createOrReplaceTempView("input")
        outputs = [plan.sink_records(batch.sparkSession.sql(spec.sql))]
        if spec.dead_letter_topic:
            outputs.append(plan.dead_letter_records(checked))
        records_write(functools.reduce(DataFrame.union, outputs), spec, kafka_format)
        counts = counted.get
        records, invalid = int(counts["records"]), int(counts["invalid"])
        by_rule: dict[str, int] = {}
        if invalid:
            rules = checked.filter(plan.invalid).groupBy(RULE_COLUMN).count().collect()
            by_rule = {row[0]: int(row[1]) for row in rules}
    finally:
        checked.unpersist()
    return BatchProgress(batch_id, records, records - invalid, invalid, by_rule)


def query_name(spec: PipelineSpec) -> str:
    """The streaming query's name (Spark's progress reports and listeners name it)."""
    return f"pipeline_{spec.name}".replace("-", "_").replace(".", "_")


def pipeline_query(
    spark: SparkSession,
    spec: PipelineSpec,
    *,
    once: bool,
    kafka_format: KafkaFormat = "python",
    on_batch: Callable[[BatchProgress], None] | None = None,
    on_batch_start: Callable[[int], None] | None = None,
    stopper: BatchEndStop | None = None,
) -> StreamingQuery:
    """Start the streaming query: every ``trigger_seconds``, or once over what is there now (``availableNow``).

    ``stopper`` holds each finished batch while a stop is under way (:class:`~pipeline.stopping.BatchEndStop`).
    """
    plan = BatchPlan(spec)  # fails before starting if the schema cannot give columns

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        if on_batch_start is not None:
            on_batch_start(batch_id)
        try:
            progress = batch_process(batch, batch_id, plan, kafka_format)
        except Exception:
            if stopper is None:
                raise
            stopper.batch_failed(batch, batch_id)  # raises BatchCut (short, no cause) if the stop cut it
            raise
        if on_batch is not None:
            on_batch(progress)
        if stopper is not None:
            stopper.batch_ended()

    writer = (
        source_stream(spark, spec, kafka_format)
        .writeStream.queryName(query_name(spec))
        .option("checkpointLocation", spec.checkpoint_location)
        .foreachBatch(each_batch)
    )
    writer = (
        writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{spec.trigger_seconds} seconds")
    )
    return writer.start()


def pipeline_run(
    spark: SparkSession,
    spec: PipelineSpec,
    *,
    once: bool,
    kafka_format: KafkaFormat = "python",
    on_batch: Callable[[BatchProgress], None] | None = None,
    on_batch_start: Callable[[int], None] | None = None,
    on_timing: Callable[[BatchTiming], None] | None = None,
) -> None:
    """Run the pipeline until it is done (``once``) or stopped; Spark's failure becomes :class:`PipelineError`.

    SIGTERM or SIGINT stops the query at the end of a micro-batch (:mod:`pipeline.stopping`).

    ``on_timing`` gets each batch's :class:`BatchTiming`: from Spark's listener thread shortly after the batch,
    or, for batches it had not delivered when the query ended, then.

    A ``once`` run whose checkpoint holds an interrupted batch runs twice: Spark's ``availableNow`` ends
    after running that batch again (:mod:`pipeline.checkpoint`); the second query takes what came after it.
    """
    timing = TimingListener(query_name(spec), on_timing) if on_timing is not None else None
    if timing is not None:
        spark.streams.addListener(timing)
    replayed = batch_replayed(spark, spec.checkpoint_location) if once else None
    start = functools.partial(
        pipeline_query,
        spark,
        spec,
        once=once,
        kafka_format=kafka_format,
        on_batch=on_batch,
        on_batch_start=on_batch_start,
    )
    try:
        signalled = _query_until_done(spec, start, timing)
        if replayed is not None and not signalled:
            _query_until_done(spec, start, timing)
    finally:
        if timing is not None:
            spark.streams.removeListener(timing)


def _query_until_done(spec: PipelineSpec, start: Callable[..., StreamingQuery], timing: TimingListener | None) -> bool:
    """Start the query with ``start(stopper=...)`` and wait until it ends or is stopped; whether a signal stopped it."""
    stopper = BatchEndStop()
    try:
        query = start(stopper=stopper)
        stopper.query = query
    except PipelineError:
        raise
    except Exception as exc:  # e.g. Spark's kafka format without its connector on the classpath
        raise PipelineError(f"pipeline {spec.name} could not start: {exc}") from exc
    try:
        with stop_signals_caught() as signalled:
            # Seconds as a float are fine (PySpark passes int(timeout * 1000) on); the stub says int.
            while not query.awaitTermination(STOP_POLL_SECONDS) and not signalled.is_set():  # type: ignore[arg-type]
                pass
            stopper.stop(query, batch_within=spec.trigger_seconds + STOP_BATCH_SECONDS)
            return signalled.is_set()
    except Exception as exc:
        # A refusal of Sluice's own source (offsets outside the log) is said as it is, not inside Spark's trace.
        own = re.search(r"pipeline\.datasource\.OffsetOutOfRange: ([^\n]*)", str(exc))
        raise PipelineError(own.group(1) if own else f"pipeline {spec.name} failed: {exc}") from exc
    finally:
        if query.isActive:
            query.stop()
        if timing is not None:
            timing.flush(query)
