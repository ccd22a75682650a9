"""``runpipeline --master spark://...`` on a real Spark standalone cluster whose workers do not have the project.

The workers' executors import the pipeline's code from the zip ``runpipeline`` ships them
(:mod:`pipeline.shipping`); their own environment has java and the Python interpreter only.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipeline.job import OFFSET_HEADER, PARTITION_HEADER, RULE_HEADER
from pipeline.services import pipeline_upsert
from tests.conftest import ROOT, gateway_env
from tests.pipeline.conftest import SparkCluster
from tests.support.pipeline_records import SCORE_SCHEMA, SCORE_SQL, raw_scores, records_produce, topic_read

pytestmark = [pytest.mark.slow]

TOTAL = 600
PARTITIONS = 4


@pytest.mark.timeout(600)  # a master, two workers, their executors and the driver on a shared machine
def test_once_on_a_standalone_cluster_writes_each_record_once(
    stream_db: None, kafka: Any, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    raw = kafka.topic(partitions=PARTITIONS, prefix="raw")
    sink = kafka.topic(partitions=PARTITIONS, prefix="sink")
    dead = kafka.topic(prefix="dlq")
    pipeline_upsert(
        name="scores-cluster",
        source_topic=raw,
        json_schema=SCORE_SCHEMA,
        sql=SCORE_SQL,
        key_field="match",
        sink_topic=sink,
        dead_letter_topic=dead,
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    records = raw_scores(TOTAL)
    records_produce(kafka.bootstrap, raw, records, PARTITIONS)

    command = [
        sys.executable, "-u", str(ROOT / "manage.py"), "runpipeline", "scores-cluster", "--once",
        "--master", spark_cluster.url,
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.executor.cores=1",
        # Tasks are scheduled once both executors are there, so both workers run some.
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=180s",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=gateway_env(kafka, SPARK_LOCAL_IP="127.0.0.1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pipeline scores-cluster: run" in done.stdout, done.stdout
    assert done.stdout.rstrip().endswith("finished"), done.stdout

    valid = [r.seq for r in records if r.rule is None]
    invalid = {(r.partition, r.offset): r for r in records if r.rule is not None}
    sunk = Counter(record.json()["seq"] for record in topic_read(kafka.bootstrap, sink))
    assert sorted(sunk) == sorted(valid)
    assert set(sunk.values()) == {1}
    letters = topic_read(kafka.bootstrap, dead)
    positions = Counter((int(x.headers[PARTITION_HEADER]), int(x.headers[OFFSET_HEADER])) for x in letters)
    assert set(positions) == set(invalid)
    assert set(positions.values()) == {1}
    for letter in letters:
        source = invalid[(int(letter.headers[PARTITION_HEADER]), int(letter.headers[OFFSET_HEADER]))]
        assert letter.headers[RULE_HEADER].decode() == source.rule

    for worker in range(len(spark_cluster.worker_dirs)):
        logs = spark_cluster.executor_logs(worker)
        text = "".join(log.read_text(errors="replace") for log in logs)
        assert "Running task" in text, f"worker {worker} ran no task; its executor logs: {logs}\n{text[-3000:]}"
        assert "ModuleNotFoundError" not in text, text[-3000:]
