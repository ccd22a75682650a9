"""The pipeline on real local Spark and the real broker, killed mid-batch and restarted (at-least-once)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from django.core.management import call_command

from pipeline.datasource import partition_ends, topic_partitions
from pipeline.job import OFFSET_HEADER, PARTITION_HEADER, RULE_HEADER, TOPIC_HEADER
from pipeline.models import PipelineRun
from pipeline.services import pipeline_upsert
from tests.conftest import ROOT, gateway_env
from tests.support.pipeline_records import SCORE_SCHEMA, SCORE_SQL, raw_scores, records_produce, topic_read
from tests.support.polling import condition_wait

pytestmark = [pytest.mark.slow]

TOTAL = 5000
PARTITIONS = 3


class PipelineProcess:
    """``manage.py runpipeline`` in a subprocess, its output collected line by line."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-u", str(ROOT / "manage.py"), "runpipeline", *args, "--master", "local[2]"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def batches_started(self) -> list[int]:
        return [int(m.group(1)) for line in list(self.lines) if (m := re.match(r"batch (\d+): started", line))]

    def output(self) -> str:
        return "".join(self.lines)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"runpipeline did not finish within {timeout}s:\n{self.output()}") from None


def sink_size(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` now (all partitions)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-tests", "enable.partition.eof": True})
    try:
        return sum(partition_ends(consumer, topic, topic_partitions(consumer, topic)).values())
    finally:
        consumer.close()


def batch_finished(output: str, batch: int) -> bool:
    return re.search(rf"^batch {batch}: \d+ in", output, re.MULTILINE) is not None


def planned_range(checkpoint: Path, batch: int) -> dict[int, tuple[int, int]]:
    """Source offsets ``[start, end)`` per partition that Spark planned for ``batch`` (its offsets log)."""

    def ends(number: int) -> dict[int, int]:
        if number < 0:
            return {}
        source = (checkpoint / "offsets" / str(number)).read_text().splitlines()[2]
        return {int(p): o for p, o in json.loads(source)["partitions"].items()}

    before, after = ends(batch - 1), ends(batch)
    return {p: (before.get(p, 0), end) for p, end in after.items()}


@pytest.mark.timeout(600)  # two Spark processes, one after the other, on a shared machine
def test_kill_mid_batch_and_restart_loses_nothing(stream_db: None, kafka: Any, tmp_path: Path) -> None:
    raw = kafka.topic(partitions=PARTITIONS, prefix="raw")
    sink = kafka.topic(partitions=PARTITIONS, prefix="sink")
    dead = kafka.topic(prefix="dlq")
    checkpoint = tmp_path / "checkpoint"
    pipeline_upsert(
        name="scores-kill",
        source_topic=raw,
        json_schema=SCORE_SCHEMA,
        sql=SCORE_SQL,
        key_field="match",
        header_fields={"league": "league"},
        sink_topic=sink,
        dead_letter_topic=dead,
        trigger_seconds=1,
        checkpoint_location=str(checkpoint),
    )
    records = raw_scores(TOTAL)
    assert sum(r.rule is not None for r in records) == TOTAL // 20  # 5% invalid
    env = gateway_env(kafka)
    # The first records are there before the job starts; the rest arrive in waves while it runs.
    records_produce(kafka.bootstrap, raw, records[:1500], PARTITIONS)
    first = PipelineProcess(env, "scores-kill")
    done_producing = threading.Event()

    def produce_rest() -> None:
        for start in range(1500, TOTAL - 250, 250):
            if done_producing.wait(0.4):
                break
            records_produce(kafka.bootstrap, raw, records[start : start + 250], PARTITIONS)
        done_producing.set()

    producer = threading.Thread(target=produce_rest, daemon=True)
    try:
        condition_wait(lambda: 0 in first.batches_started(), within=120, what=lambda: f"batch 0:\n{first.output()}")
        producer.start()
        started = condition_wait(
            lambda: max(first.batches_started()) if max(first.batches_started()) >= 1 else None,
            within=120,
            what="a second batch",
        )
        # Kill once that batch's writes reach the broker (so the replay can duplicate), or when it
        # has finished, whichever is first.
        written = sink_size(kafka.bootstrap, sink)
        condition_wait(
            lambda: sink_size(kafka.bootstrap, sink) > written or batch_finished(first.output(), started),
            within=120,
            what=f"batch {started} to write",
            interval=0.02,
        )
        first.kill()
    finally:
        if first.process.poll() is None:
            first.kill()
    # The last batch started is the one in flight (if it had finished, its commit may still have been
    # missing: either way Spark replays only that batch).
    interrupted = max(first.batches_started())
    producer.join(60)
    # The last wave comes after the kill, so after every batch the first run planned: the restart
    # runs the interrupted batch again, then goes on to what came after it.
    if not all(r.offset >= 0 for r in records):
        records_produce(kafka.bootstrap, raw, [r for r in records if r.offset < 0], PARTITIONS)

    second = PipelineProcess(env, "scores-kill", "--once")
    assert second.wait(240) == 0, second.output()
    assert min(second.batches_started()) >= interrupted, second.output()

    by_position = {(r.partition, r.offset): r for r in records}
    valid = {r.seq for r in records if r.rule is None}
    out = topic_read(kafka.bootstrap, sink)
    seen = Counter(r.json()["seq"] for r in out)
    raw_ends = [(r.partition, r.offset) for r in records if r.seq in valid - set(seen)][:10]
    # every valid record, nothing invalid
    assert set(seen) == valid, f"missing {len(valid - set(seen))}, e.g. at {raw_ends}:\n{second.output()}"
    for record in out:
        value = record.json()
        assert record.key == value["match"].encode()
        assert record.headers["league"] == value["league"].encode()
        assert by_position[(value["src_partition"], value["src_offset"])].seq == value["seq"]
    # Duplicates can only come from the batch the kill interrupted (Spark replays it from its offsets log).
    replayed = planned_range(checkpoint, interrupted)
    for record in out:
        value = record.json()
        if seen[value["seq"]] > 1:
            start, end = replayed.get(value["src_partition"], (0, 0))
            assert start <= value["src_offset"] < end, (value, replayed)
    assert all(count <= 2 for count in seen.values())

    letters = topic_read(kafka.bootstrap, dead)
    rules: dict[int, str] = {}
    for letter in letters:
        assert letter.headers[TOPIC_HEADER] == raw.encode()
        source = by_position[(int(letter.headers[PARTITION_HEADER]), int(letter.headers[OFFSET_HEADER]))]
        assert letter.value == source.value
        assert letter.headers["origin"] == b"test"  # the record's own headers are kept
        rules[source.seq] = letter.headers[RULE_HEADER].decode()
    assert rules == {r.seq: r.rule for r in records if r.rule is not None}

    runs = list(PipelineRun.objects.filter(pipeline__name="scores-kill").order_by("started", "id"))
    assert [r.status for r in runs] == ["interrupted", "succeeded"]
    assert sum(r.records_in for r in runs) >= TOTAL - 1500  # the first run's last batch was lost with it
    assert runs[1].records_valid + runs[1].records_invalid == runs[1].records_in


@pytest.mark.django_db(transaction=True)
def test_verbose_run_says_where_each_batch_spent_its_time(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    raw = pipeline_kafka.topic(partitions=2, prefix="raw")
    records_produce(pipeline_kafka.bootstrap, raw, raw_scores(60), 2)
    pipeline_upsert(
        name="scores-timed",
        source_topic=raw,
        json_schema=SCORE_SCHEMA,
        sql=SCORE_SQL,
        sink_topic=pipeline_kafka.topic(prefix="sink"),
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    quiet, verbose = StringIO(), StringIO()
    call_command("runpipeline", "scores-timed", "--once", stdout=quiet)
    assert "timing" not in quiet.getvalue()
    records_produce(pipeline_kafka.bootstrap, raw, raw_scores(40), 2)
    call_command("runpipeline", "scores-timed", "--once", verbosity=2, stdout=verbose)
    lines = re.findall(r"^batch (\d+) timing: \d+ ms for (\d+) rows \((.*)\)$", verbose.getvalue(), re.MULTILINE)
    assert [(batch, rows) for batch, rows, _ in lines] == [("1", "40")], verbose.getvalue()
    parts = dict(part.rsplit(" ", 1) for part in lines[0][2].split(", "))
    assert {"latestOffset", "walCommit", "addBatch", "commitOffsets"} <= set(parts)


@pytest.mark.django_db(transaction=True)
def test_each_record_is_counted_by_rule_whatever_the_sql_keeps(spark: Any, pipeline_kafka: Any, tmp_path: Path) -> None:
    """The producing tasks count the batch's records, not the SQL's output rows; without a dead-letter topic too."""
    raw, sink = pipeline_kafka.topic(partitions=2, prefix="raw"), pipeline_kafka.topic(prefix="sink")
    records = raw_scores(400, invalid_every=10)
    records_produce(pipeline_kafka.bootstrap, raw, records, 2)
    pipeline_upsert(
        name="scores-counted",
        source_topic=raw,
        json_schema=SCORE_SCHEMA,
        sql="SELECT match, seq FROM input WHERE league = 'liga'",
        sink_topic=sink,
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    out = StringIO()
    call_command("runpipeline", "scores-counted", "--once", stdout=out)
    valid = [r for r in records if r.rule is None]
    rules = Counter(r.rule for r in records if r.rule is not None)
    assert len(rules) == 7
    by_rule = ", ".join(f"{rule} {count}" for rule, count in sorted(rules.items()))
    assert f"batch 0: 400 in, {len(valid)} valid, 40 invalid ({by_rule})" in out.getvalue(), out.getvalue()
    run = PipelineRun.objects.get(pipeline__name="scores-counted")
    assert (run.status, run.records_in, run.records_valid, run.records_invalid) == ("succeeded", 400, len(valid), 40)
    kept = sorted(r.seq for r in valid if r.league == "liga")
    assert sorted(r.json()["seq"] for r in topic_read(pipeline_kafka.bootstrap, sink)) == kept
