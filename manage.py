#!/usr/bin/env python
"""Django's command-line entry point for Sluice."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from streams.server.reactor import EventLoopError, reactor_install

    try:
        reactor_install()  # before Django imports daphne, which would install its own
    except EventLoopError as exc:
        sys.exit(f"manage.py: {exc}")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
