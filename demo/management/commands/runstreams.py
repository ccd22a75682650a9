"""``manage.py runstreams --demo``: the streams app's command, with the demo set up before serving.

The demo app is listed before ``streams`` in ``INSTALLED_APPS``, so this command
takes the name (as ``django.contrib.staticfiles`` does with ``runserver``); the
streams app knows nothing of the demo.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from streams.management.commands.runstreams import Command as StreamsCommand


class Command(StreamsCommand):
    help = StreamsCommand.help + " With --demo: live demo data, routes, a guard and an admin."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--demo", action="store_true", help="Migrate, create a demo admin, topic, routes and live data."
        )

    def before_serving(self, bootstrap: str, options: dict[str, Any]) -> list[Any]:
        if not options["demo"]:
            return []
        from demo.seed import demo_start

        return demo_start(bootstrap, self.stdout.write)
