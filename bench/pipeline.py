"""Pipeline throughput: the Spark job (``local[2]``) against a plain consume-validate-produce loop.

Starts the embedded broker, fills a 3-partition raw topic with N small JSON score records
(5 % invalid), then for each N runs both on the same data:

- **spark**: ``pipeline.job.pipeline_run(once=True)`` (availableNow) with the Python Kafka data
  source, the JSON Schema checks as Spark expressions, ``SCORE_SQL``-like shaping, key and header;
- **loop**: one Python process: confluent-kafka consumer (partitions assigned), ``json.loads``,
  ``jsonschema`` validation, the same shaping, confluent-kafka producer.

Both write valid records to a sink topic and invalid ones (with the rule header) to a dead-letter
topic; the sink and dead-letter record counts are checked. See docs/benchmarks.md.

    python bench/pipeline.py --records 10000,100000,1000000 --output docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from bench.lib.report import git_commit, output_write  # noqa: E402
from pipeline.datasource import partition_ends  # noqa: E402
from streams.server.broker import EmbeddedBroker, topic_ensure  # noqa: E402

PARTITIONS = 3
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["match", "league", "minute", "seq"],
    "properties": {
        "match": {"type": "string", "pattern": "^match-[0-9]+$"},
        "league": {"enum": ["premier", "liga"]},
        "home": {"type": "string", "minLength": 1, "maxLength": 40},
        "away": {"type": "string", "minLength": 1, "maxLength": 40},
        "score": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "minute": {"type": "integer", "minimum": 0, "maximum": 120},
        "seq": {"type": "integer"},
    },
}
SQL = "SELECT match, league, home, away, score, minute, seq FROM input"
MARK_BEGIN = "<!-- bench/pipeline.py results: begin -->"
MARK_END = "<!-- bench/pipeline.py results: end -->"


def raw_values(count: int) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of about 130 bytes; every 20th breaks a rule."""
    out = []
    for seq in range(count):
        value: dict[str, Any] = {
            "match": f"match-{seq % 97}",
            "league": "premier" if seq % 2 else "liga",
            "home": "Arsenal",
            "away": "Chelsea",
            "score": [seq % 4, seq % 3],
            "minute": seq % 90,
            "seq": seq,
        }
        if seq % 20 == 19:
            value = [{**value, "minute": 500}, {**value, "league": "x"}, {**value, "minute": "7"}][seq // 20 % 3]
        out.append((value["match"].encode(), json.dumps(value, separators=(",", ":")).encode()))
    return out


def topic_fill(bootstrap: str, topic: str, values: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "log_level": 0})
    for i, (key, value) in enumerate(values):
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def topic_count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.partition.eof": True})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        return sum(partition_ends(consumer, topic, partitions, timeout=30).values())
    finally:
        consumer.close()


def plain_loop(bootstrap: str, source: str, sink: str, dead: str, expected: int) -> None:
    """The baseline: one process, one consumer, jsonschema per record, one producer."""
    import jsonschema

    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-loop",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52428800,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 500000,
            "log_level": 0,
        }
    )

    def send(topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value, headers=headers)
                return
            except BufferError:
                producer.poll(0.05)

    consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
    done, seen = set(), 0
    while len(done) < PARTITIONS:
        for message in consumer.consume(10000, timeout=1):
            error = message.error()
            if error is not None:
                # The topic is complete before the loop starts: the end of a partition is the end of its work.
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                continue
            seen += 1
            raw = message.value() or b""
            try:
                document = json.loads(raw)
                problem = next(validator.iter_errors(document), None)
                rule = None if problem is None else f"{problem.validator}:/{'/'.join(map(str, problem.path))}"
            except ValueError:
                rule = "json:/"
            if rule is not None:
                headers = [("sluice.rule", rule.encode()), ("sluice.offset", str(message.offset()).encode())]
                send(dead, message.key(), raw, headers)
                continue
            shaped = {k: document.get(k) for k in ("match", "league", "home", "away", "score", "minute", "seq")}
            send(
                sink,
                shaped["match"].encode(),
                json.dumps(shaped, separators=(",", ":")).encode(),
                [("league", shaped["league"].encode())],
            )
        producer.poll(0)
    assert producer.flush(120) == 0
    consumer.close()
    assert seen == expected, f"read {seen} of {expected} records"


def spark_job(spark: Any, bootstrap: str, source: str, sink: str, dead: str, checkpoint: str) -> None:
    from pipeline.job import PipelineSpec, pipeline_run

    spec = PipelineSpec(
        name="bench",
        bootstrap=bootstrap,
        json_schema=SCHEMA,
        sink_topic=sink,
        dead_letter_topic=dead,
        checkpoint_location=checkpoint,
        source_topic=source,
        sql=SQL,
        key_field="match",
        header_fields={"league": "league"},
    )
    pipeline_run(spark, spec, once=True, on_batch=lambda p: print(f"    {p}", flush=True))


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the machine, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


@dataclass
class Result:
    records: int
    contender: str
    seconds: float
    sink: int
    dead: int
    machine_busy: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def measure(name: str, records: int, body: Any, bootstrap: str, sink: str, dead: str) -> Result:
    busy0, total0 = cpu_busy()
    start = time.perf_counter()
    body()
    seconds = time.perf_counter() - start
    busy1, total1 = cpu_busy()
    result = Result(
        records,
        name,
        seconds,
        topic_count(bootstrap, sink),
        topic_count(bootstrap, dead),
        100 * (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1),
    )
    print(
        f"  {name:5} {records:>9,} records: {seconds:7.1f} s, {result.rate:9,.0f} records/s,"
        f" sink {result.sink:,}, dead letters {result.dead:,}, machine busy {result.machine_busy:.0f} % of one core",
        flush=True,
    )
    return result


def cold_run(spark: Any, bootstrap: str, count: int) -> Result:
    source = f"bench-raw-{uuid.uuid4().hex[:8]}"
    topic_ensure(bootstrap, source, PARTITIONS)
    topic_fill(bootstrap, source, raw_values(count))
    sink, dead = f"{source}-sink", f"{source}-dlq"
    topic_ensure(bootstrap, sink, PARTITIONS)
    topic_ensure(bootstrap, dead, 1)
    checkpoint = tempfile.mkdtemp(prefix="sluice-bench-")
    return measure(
        "spark, first query (cold)",
        count,
        lambda: spark_job(spark, bootstrap, source, sink, dead, checkpoint),
        bootstrap,
        sink,
        dead,
    )


def report(results: list[Result], startup: float, command: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{git_commit()}`"
        f" on {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()};"
        f" SparkSession start-up (not in the times below): {startup:.1f} s.",
        "",
        "```",
        command,
        "```",
        "",
        "| records | contender | seconds | records/s | sink | dead letters | machine busy (% of one core) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.records:,} | {r.contender} | {r.seconds:.1f} | {r.rate:,.0f} | {r.sink:,} | {r.dead:,}"
            f" | {r.machine_busy:.0f} |"
        )
    lines.append(MARK_END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="10000,100000", help="Comma-separated record counts.")
    parser.add_argument("--contenders", default="loop,spark", help="loop, spark or both.")
    parser.add_argument("--warmup", type=int, default=5000, help="Records of a first, cold Spark run (0: none).")
    parser.add_argument("--output", type=Path, help="Write the results section into this markdown file.")
    args = parser.parse_args()
    counts = [int(x) for x in args.records.split(",")]
    contenders = args.contenders.split(",")
    command = "python bench/pipeline.py " + " ".join(sys.argv[1:])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the broker and Spark are stopped
    broker = EmbeddedBroker().start()
    results: list[Result] = []
    spark = None
    startup = 0.0
    try:
        bootstrap = broker.bootstrap
        if "spark" in contenders:
            from pipeline.job import spark_session

            os.environ.setdefault("SLUICE_SPARK_DRIVER_MEMORY", "2g")
            start = time.perf_counter()
            spark = spark_session("local[2]", app_name="sluice-bench")
            startup = time.perf_counter() - start
            print(f"SparkSession started in {startup:.1f} s", flush=True)
        if "spark" in contenders and args.warmup:
            # The first query of a JVM pays for class loading, code generation and Python workers.
            results.append(cold_run(spark, bootstrap, args.warmup))
        for count in counts:
            source = f"bench-raw-{uuid.uuid4().hex[:8]}"
            topic_ensure(bootstrap, source, PARTITIONS)
            values = raw_values(count)
            start = time.perf_counter()
            topic_fill(bootstrap, source, values)
            print(f"{count:,} records in {source} ({time.perf_counter() - start:.1f} s to produce)", flush=True)
            del values
            for contender in contenders:
                sink, dead = f"{source}-{contender}-sink", f"{source}-{contender}-dlq"
                topic_ensure(bootstrap, sink, PARTITIONS)
                topic_ensure(bootstrap, dead, 1)
                if contender == "loop":

                    def body(sink: str = sink, dead: str = dead, source: str = source, count: int = count) -> None:
                        plain_loop(bootstrap, source, sink, dead, count)
                else:
                    checkpoint = tempfile.mkdtemp(prefix="sluice-bench-")

                    def body(sink: str = sink, dead: str = dead, source: str = source, cp: str = checkpoint) -> None:
                        spark_job(spark, bootstrap, source, sink, dead, cp)

                results.append(measure(contender, count, body, bootstrap, sink, dead))
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    section = report(results, startup, command)
    print(section)
    if args.output:
        output_write(args.output, section, MARK_BEGIN, MARK_END)


if __name__ == "__main__":
    main()
