"""Demo data for the pipeline: a raw feed of match reports, and the pipeline that shapes it into ``demo.scores``.

The raw feed looks like what a data provider sends (nested fixture, upper-case league,
clock and goals under their own names, now and then a broken record); the demo pipeline
checks it against :data:`DEMO_RAW_SCHEMA` and shapes it with :data:`DEMO_SQL` into the
records ``demo.scores`` publishes: JSON ``{match, league, home, away, score, minute,
ts}`` keyed by match, with a ``league`` header.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from django.conf import settings

from pipeline.models import Pipeline
from pipeline.services import pipeline_upsert
from streams.conf import streams_settings
from streams.core.clusters import client_settings
from streams.server.broker import topic_ensure
from streams.server.processes import die_with_parent

DEMO_PIPELINE = "demo-scores"
DEMO_RAW_TOPIC = "demo.scores.raw"
DEMO_SINK_TOPIC = "demo.scores"
DEMO_DEAD_LETTER_TOPIC = "demo.scores.invalid"
DEMO_PARTITIONS = 3
# Where `runstreams --demo` sends the pipeline's output (its own topic, so the direct demo feed stays apart).
DEMO_PIPELINE_TOPIC = "demo.pipeline.scores"
DEMO_PIPELINE_ROUTE = "/demo/pipeline/leagues/{league}"

DEMO_RAW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["fixture", "teams", "goals", "clock", "sent_at"],
    "properties": {
        "fixture": {
            "type": "object",
            "required": ["id", "league"],
            "properties": {"id": {"type": "integer", "minimum": 0}, "league": {"enum": ["PREMIER", "LIGA"]}},
        },
        "teams": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 2, "maxItems": 2},
        "goals": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "clock": {"type": "integer", "minimum": 0, "maximum": 130},
        "sent_at": {"type": "integer"},
    },
}
DEMO_SQL = """SELECT concat('match-', fixture.id) AS match,
       lower(fixture.league) AS league,
       teams[0] AS home,
       teams[1] AS away,
       goals AS score,
       clock AS minute,
       sent_at AS ts
FROM input"""

_TEAMS = {
    "PREMIER": ["Arsenal", "Chelsea", "Liverpool", "Everton", "Fulham", "Brentford", "Spurs", "Wolves"],
    "LIGA": ["Betis", "Girona", "Osasuna", "Sevilla", "Valencia", "Villarreal", "Getafe", "Alaves"],
}


@dataclass
class _Fixture:
    id: int
    league: str
    teams: list[str]
    clock: int = 0
    goals: list[int] = field(default_factory=lambda: [0, 0])


class DemoRawProducer:
    """A background thread publishing raw match reports (about 1 in 25 broken) a few times a second."""

    def __init__(
        self, client: dict[str, str], topic: str = DEMO_RAW_TOPIC, interval: float = 0.4, seed: int | None = None
    ):
        self._producer = Producer({**client, "linger.ms": 5, "log_level": 0})
        self._topic = topic
        self._interval = interval
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-demo-raw-producer", daemon=True)
        self._next_id = 0
        self._fixtures = [self._fixture(league) for league in ["PREMIER", "LIGA"] * 3]

    def _fixture(self, league: str) -> _Fixture:
        self._next_id += 1
        return _Fixture(self._next_id, league, self._random.sample(_TEAMS[league], 2))

    def start(self) -> DemoRawProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._producer.flush(5)

    def flush(self, timeout: float = 10.0) -> int:
        return self._producer.flush(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.step()
            self._producer.poll(0)

    def step(self) -> None:
        """Publish one report: a fixture's clock moves on, sometimes a goal; a finished fixture is replaced."""
        index = self._random.randrange(len(self._fixtures))
        fixture = self._fixtures[index]
        fixture.clock += self._random.randint(1, 6)
        if fixture.clock >= 90:
            self._fixtures[index] = self._fixture(fixture.league)
            return
        if self._random.random() < 0.3:
            fixture.goals[self._random.randrange(2)] += 1
        report: dict[str, Any] = {
            "fixture": {"id": fixture.id, "league": fixture.league},
            "teams": fixture.teams,
            "goals": fixture.goals,
            "clock": fixture.clock,
            "sent_at": int(time.time() * 1000),
        }
        if self._random.random() < 0.04:  # what real feeds do: a field missing, or a clock gone wrong
            report = self._random.choice([{**report, "clock": -1}, {k: v for k, v in report.items() if k != "teams"}])
        self._producer.produce(self._topic, key=str(fixture.id).encode(), value=json.dumps(report).encode())


def demo_pipeline_setup(
    client: str | dict[str, str],
    *,
    start_producer: bool = True,
    raw_topic: str = DEMO_RAW_TOPIC,
    sink_topic: str = DEMO_SINK_TOPIC,
    dead_letter_topic: str = DEMO_DEAD_LETTER_TOPIC,
    name: str = DEMO_PIPELINE,
    checkpoint_location: str = "",
) -> tuple[Pipeline, DemoRawProducer]:
    """Create the demo's raw topic, its producer and the pipeline that shapes it into ``demo.scores``.

    ``client`` is the Kafka to use: bootstrap servers, or a cluster's settings. Needs the
    database (migrated). Creates the raw, sink and dead-letter topics (3 partitions) if missing,
    creates or updates the Pipeline row ``demo-scores`` (inline schema, :data:`DEMO_SQL`, key
    ``match``, header ``league``), and returns it with a :class:`DemoRawProducer` that is already
    publishing unless ``start_producer`` is false; call its ``stop()`` on exit. The Spark job is not
    started here: run ``manage.py runpipeline demo-scores`` (a separate process, with
    the Kafka settings of ``client`` in its environment). Unlike ``demo.scores`` the pipeline sends
    no tombstones: records it writes always have a value.
    """
    for topic in (raw_topic, sink_topic, dead_letter_topic):
        topic_ensure(client, topic, DEMO_PARTITIONS)
    pipeline = pipeline_upsert(
        name=name,
        description="Demo: raw match reports shaped into live scores",
        source_kind=Pipeline.SourceKind.KAFKA,
        source_topic=raw_topic,
        source_files="",
        json_schema=DEMO_RAW_SCHEMA,
        schema=None,
        sql=DEMO_SQL,
        key_field="match",
        header_fields={"league": "league"},
        sink_topic=sink_topic,
        dead_letter_topic=dead_letter_topic,
        trigger_seconds=1,  # a micro-batch as soon as the last one is done (see docs/pipeline.md, Latency)
        checkpoint_location=checkpoint_location,
    )
    producer = DemoRawProducer(client_settings(client), raw_topic)
    if start_producer:
        producer.start()
    return pipeline, producer


class DemoPipelineJob:
    """``manage.py runpipeline NAME`` in a child process, for as long as the demo runs (output to a log file).

    The child has a session of its own: Ctrl-C in the terminal reaches the demo only, which
    then stops the child with one SIGTERM (the job stops its query between two micro-batch
    waits) and, past the shutdown time, SIGKILL. A SIGINT sent to the child as well would
    land inside a py4j call and fill the log with tracebacks.
    """

    def __init__(self, name: str, bootstrap: str, log: Path, cleanup: str = "") -> None:
        self.name = name
        self.cleanup = cleanup  # a directory (the run's checkpoint) removed once the job has stopped
        self.bootstrap = bootstrap
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self._stop_by = 0.0  # when SIGTERM was sent: monotonic time to SIGKILL at

    def start(self) -> DemoPipelineJob:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # The child's environment: this one's, with the Kafka the demo serves from (the embedded broker).
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap}
        with open(self.log, "ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "runpipeline", self.name],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        return self

    def stop_begin(self) -> None:
        """Ask the job to stop (SIGTERM) now, while the server still ends its streams."""
        if self.process is not None and self.process.poll() is None and not self._stop_by:
            self._stop_by = time.monotonic() + streams_settings.SHUTDOWN_SECONDS
            self.process.terminate()

    def stop(self) -> None:
        if self.process is not None:
            self.stop_begin()
            try:  # one SIGTERM only: a second one would land in the job's own clean-up
                self.process.wait(timeout=max(0.0, self._stop_by - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.cleanup:
            shutil.rmtree(self.cleanup, ignore_errors=True)
