"""The ASGI application of one worker: its runtime, the stream router, Django behind it.

Built once per worker process: by the gateway (with the embedded broker's
bootstrap servers when ``runstreams`` started one) or by ``project.asgi`` for any
other ASGI server.
"""

from __future__ import annotations

from typing import Any

from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

from streams.edge.app import StreamRouter
from streams.edge.runtime import WorkerRuntime
from streams.server.client_files import ClientFiles


def worker_application(runtime: WorkerRuntime) -> Any:
    """Stream paths answered by the stream app with ``runtime``; the rest by Django."""
    # The admin's and pages' static files come from the same server: one process to run; the
    # browser client's files come first, loadable from any origin.
    django_application = ClientFiles(ASGIStaticFilesHandler(get_asgi_application()))
    return ProtocolTypeRouter({"http": StreamRouter(fallback=django_application, runtime=runtime)})
