"""Configuration changes: drop this process's route table now, and tell every worker once committed.

Workers the broadcast does not reach (no shared channel layer, or a write that sends no signal:
``QuerySet.update()``, raw SQL, another process) see the change through the configuration's
revision within ``SLUICE_ROUTE_CACHE_SECONDS``: its triggers are set up after every ``migrate``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.apps import AppConfig, apps
from django.db import connections, transaction
from django.db.models.signals import post_delete, post_migrate, post_save

from guards.models import Guard
from streams.edge.authorization.reconfiguration import CONFIG_GROUP, MESSAGE_TYPE
from streams.models import Route, RouteFilter, Schema, Topic, revision_triggers_install
from streams.selectors import route_table_invalidate

logger = logging.getLogger("sluice.config")


def config_change_publish() -> None:
    """Broadcast "configuration changed" on the channel layer (every worker reloads and reconciles)."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": MESSAGE_TYPE}
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is None:
            async_to_sync(layer.group_send)(CONFIG_GROUP, message)
        else:  # a write from async code (tests, async services): no thread to block here
            task = loop.create_task(layer.group_send(CONFIG_GROUP, message))
            task.add_done_callback(_publish_done)
    except Exception:
        logger.exception("configuration change not broadcast; workers pick it up within SLUICE_ROUTE_CACHE_SECONDS")


def _publish_done(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("configuration change not broadcast: %s", task.exception())


def config_changed(**kwargs: Any) -> None:
    route_table_invalidate()
    transaction.on_commit(config_change_publish)


# Routes embed their guard's compiled policy: a guard change is a configuration change too.
for _model in (Route, RouteFilter, Topic, Schema, Guard):
    post_save.connect(config_changed, sender=_model, dispatch_uid=f"sluice-config-save-{_model.__name__}")
    post_delete.connect(config_changed, sender=_model, dispatch_uid=f"sluice-config-delete-{_model.__name__}")


def revision_triggers_ensure(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """After ``migrate`` or ``flush``: the revision's triggers, set up again (a rebuilt table lost its own)."""
    if not revision_triggers_install(connections[using]):
        logger.warning(
            "no configuration revision on this database (%s): every worker rebuilds its route table "
            "every SLUICE_ROUTE_CACHE_SECONDS",
            connections[using].vendor,
        )


post_migrate.connect(
    revision_triggers_ensure, sender=apps.get_app_config("streams"), dispatch_uid="sluice-config-revision-triggers"
)
