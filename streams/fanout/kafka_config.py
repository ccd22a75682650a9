"""librdkafka settings of every consumer Sluice makes: the hub's fetchers and look-ups, and the pipeline's readers.

Every consumer is assigned its partitions and never joins its group nor commits:
positions live in the stream (the hub) or in Spark's checkpoint (the pipeline).
What differs between them is a parameter here, so the shared part cannot drift.

No Django here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streams.core.clusters import client_settings


@dataclass(frozen=True, slots=True)
class ConsumerDefaults:
    """What a kind of consumer differs in; the cluster's own settings may change each.

    ``group`` is the group id librdkafka wants even for ``assign()``, never joined
    (None: one nobody else has).
    """

    group: str | None = None
    fetch_wait_ms: int = 100
    log_level: int = 3


def consumer_config(
    client: Mapping[str, Any] | str, defaults: ConsumerDefaults = ConsumerDefaults(), /, **extra: Any
) -> dict[str, Any]:
    """Settings of an assigned consumer: the cluster's (``client``) over the shared ones, ``extra`` over both."""
    config: dict[str, Any] = {
        "group.id": defaults.group if defaults.group is not None else f"sluice-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": defaults.fetch_wait_ms,
        "socket.keepalive.enable": True,
        # Records of aborted transactions are never delivered (librdkafka's default, stated).
        "isolation.level": "read_committed",
        "log_level": defaults.log_level,
    }
    config.update(client_settings(client))
    config.update(extra)
    return config
