#!/usr/bin/env python
"""Django's command-line entry point for Sluice."""

from __future__ import annotations

import os
import sys

# Asked alone or after a command name, these print and exit before any command runs.
HELP_ARGUMENTS = frozenset({"help", "-h", "--help", "--version"})


def help_only(argv: list[str]) -> bool:
    """Whether ``argv`` only asks for help: the commands and their options, nothing run."""
    args = argv[1:]
    if "--" in args:
        args = args[: args.index("--")]
    return not args or args[0] in HELP_ARGUMENTS or any(arg in {"-h", "--help"} for arg in args[1:])


def settings_load(argv: list[str]) -> None:
    """Import the settings, or exit with their one-line complaint (a missing SECRET_KEY, most often).

    Help needs the installed apps (for their commands) but no secret: asked for help alone,
    a placeholder key stands in for a missing one, as nothing is served or signed.
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018 - imports project.settings
    except ImproperlyConfigured as exc:
        if not help_only(argv) or os.environ.get("SECRET_KEY"):
            sys.exit(f"manage.py: {exc}")
        os.environ["SECRET_KEY"] = "placeholder-for-help-only"
        try:
            settings.INSTALLED_APPS  # noqa: B018
        except ImproperlyConfigured as again:
            sys.exit(f"manage.py: {again}")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    settings_load(sys.argv)
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
