#!/usr/bin/env python
"""Django's command-line entry point for Sluice."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from streams.conf import streams_settings
    from streams.server.reactor import EventLoopError, reactor_install

    try:
        # Before Django imports daphne, which would install its own (the settings are read, no app is loaded).
        reactor_install(streams_settings.EVENT_LOOP)
    except EventLoopError as exc:
        sys.exit(f"manage.py: {exc}")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
