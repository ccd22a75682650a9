"""``manage.py runpipeline NAME [--once] [--reset-checkpoint] [--master URL] [--conf KEY=VALUE]... [--kafka-format F]``.

With ``-v 2`` it also prints where each micro-batch's time went (Spark's progress durations).
Once the query runs, SIGTERM or SIGINT stops it cleanly and the run is recorded as ended
(:mod:`pipeline.stopping`); before that, SIGTERM ends the process at once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Run a pipeline's Spark job: continuously at its trigger interval, or --once over what is there."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The pipeline's name.")
        parser.add_argument("--once", action="store_true", help="Process what is there now, then stop.")
        parser.add_argument("--master", help="Spark master URL (default: SPARK_MASTER, else local[*]).")
        parser.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A Spark property, as spark-submit's --conf (repeatable), e.g. spark.executor.memory=2g.",
        )
        parser.add_argument(
            "--reset-checkpoint",
            action="store_true",
            help="Start over on purpose: remove the pipeline's checkpoint first (offsets are read anew).",
        )
        parser.add_argument(
            "--kafka-format",
            choices=["python", "kafka"],
            default="python",
            help="python: Sluice's data source on confluent-kafka; kafka: Spark's connector (its jar must be there).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from pipeline.job import PipelineError
        from pipeline.runner import pipeline_execute

        def report(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        spark_conf = {}
        for pair in options["conf"]:
            key, equals, value = pair.partition("=")
            if not equals or not key.strip():
                raise CommandError(f"--conf takes KEY=VALUE, not {pair!r}")
            spark_conf[key.strip()] = value
        try:
            pipeline_execute(
                options["name"],
                once=options["once"],
                master=options["master"],
                kafka_format=options["kafka_format"],
                report=report,
                reset_checkpoint=options["reset_checkpoint"],
                timings=options["verbosity"] >= 2,
                spark_conf=spark_conf,
            )
        except PipelineError as exc:
            raise CommandError(str(exc)) from exc
