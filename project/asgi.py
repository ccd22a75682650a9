"""ASGI entry point: stream routes are answered by Sluice's stream app, the rest by Django.

``runstreams`` builds its own (:func:`streams.server.application.worker_application`,
with the embedded broker it may have started); this one is for any other ASGI server.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
get_asgi_application()  # sets Django up before the apps' modules are imported

from streams.edge.runtime import WorkerRuntime  # noqa: E402  (needs Django set up first)
from streams.server.application import worker_application  # noqa: E402

application = worker_application(WorkerRuntime())
