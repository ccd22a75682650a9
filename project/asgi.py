"""ASGI entry point: stream routes are answered by Sluice's stream app, the rest by Django."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from streams.edge.app import StreamRouter  # noqa: E402
from streams.ops.client_files import ClientFiles  # noqa: E402  (the client's files, loadable from any origin)

# The admin's and pages' static files come from the same server: one process to run.
application = ProtocolTypeRouter(
    {"http": StreamRouter(fallback=ClientFiles(ASGIStaticFilesHandler(django_application)))}
)
