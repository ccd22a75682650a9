"""``manage.py exportconfig [-o FILE] [--kafka-state]``: the guards, schemas, topics and routes as a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from streams.config.engine import config_dump, config_export
from streams.config.kafka_topics import config_topics_state


class Command(BaseCommand):
    help = "Write the configuration as YAML that applyconfig takes back unchanged."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", help="File to write (default: standard output).")
        parser.add_argument(
            "--kafka-state",
            action="store_true",
            help="End with each topic's state in Kafka (exists, partitions, end offsets) as comments.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        text = config_dump(config_export())
        if options["kafka_state"]:
            text += config_topics_state()
        if not options["output"]:
            self.stdout.write(text, ending="")
            return
        try:
            Path(options["output"]).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {options['output']}: {exc}") from exc
