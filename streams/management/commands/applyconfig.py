"""``manage.py applyconfig FILE [--prune] [--check] [--create-topics]``: configuration as code (SPEC 6)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.config.document import ConfigError
from streams.config.engine import ConfigReport
from streams.config.kafka_topics import TopicsCreated, config_topics_create
from streams.config.loading import config_apply_file


def report_topics(report: ConfigReport) -> list[str]:
    """The topics the file names (created, updated or unchanged)."""
    return [key for _, label, key in report.actions if label == "topic"]


class Command(BaseCommand):
    help = "Apply a Sluice configuration file (or a Zilla zilla.yaml, or an AsyncAPI 3.0 document)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="YAML (or JSON) file to apply.")
        parser.add_argument("--prune", action="store_true", help="Delete what the file does not name.")
        parser.add_argument("--check", action="store_true", help="Validate everything, change nothing.")
        parser.add_argument(
            "--create-topics",
            action="store_true",
            help="Then create the file's topics that Kafka does not have, with their kafka.partitions, "
            "kafka.replication_factor and kafka.configs (with --check: say which it would create).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        topics = TopicsCreated()

        def checked(report: ConfigReport) -> None:  # the rows as the file would leave them, before the rollback
            nonlocal topics
            topics = config_topics_create(report_topics(report), check=True)

        create, check = options["create_topics"], options["check"]
        try:
            report = config_apply_file(
                options["file"], prune=options["prune"], check=check, checked=checked if create else None
            )
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
        if create and not check:
            topics = config_topics_create(report_topics(report))
        for line in topics.lines:
            self.stdout.write(line)
        if topics.failures:
            raise CommandError("; ".join(topics.failures))
