"""``manage.py applyconfig FILE [--prune] [--check]``: configuration as code (SPEC 6)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.config.document import ConfigError
from streams.config.loading import config_apply_file


class Command(BaseCommand):
    help = "Apply a Sluice configuration file (or a Zilla zilla.yaml, or an AsyncAPI 3.0 document)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="YAML (or JSON) file to apply.")
        parser.add_argument("--prune", action="store_true", help="Delete what the file does not name.")
        parser.add_argument("--check", action="store_true", help="Validate everything, change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = config_apply_file(options["file"], prune=options["prune"], check=options["check"])
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
