"""How long a topic's fetch waits at the broker, and whether a new record waits for company.

Two settings trade latency against work per delivery, and neither has one right value:

- ``fetch.wait.max.ms``: how long the broker may hold a fetch that found nothing. Kafka
  answers a waiting fetch as soon as a record arrives, so a long wait costs nothing and
  saves empty round trips. Some brokers (tansu, the embedded broker) hold it to the end
  whatever arrives: a record then waits half the setting on average. The wait is fitted
  to the broker: short where it holds fetches, long where it answers early, unless
  ``SLUICE_FETCH_WAIT_MS`` says otherwise.
- the linger: after a record, how long to wait for more before writing to the streams.
  Batching is what keeps the cost per delivery low under load (one write per stream per
  batch), but when records come one at a time it is only delay. :class:`Linger` sends at
  once when the fetch brought one record or a few, and lingers only when it brought many.
"""

from __future__ import annotations

# Cluster ids of brokers that hold a waiting fetch to its end although records arrived.
_HOLDING_CLUSTERS = ("tansu",)
# fetch.wait.max.ms for a broker that holds fetches (a record waits about half of it) ...
HOLDING_WAIT_MS = 2
# ... and for one that answers as soon as a record arrives.
ANSWERING_WAIT_MS = 100
# Records a fetch must bring at once before the fetcher lingers for more: fewer is not load.
BUSY_RECORDS = 4


def broker_holds_fetches(cluster_id: str | None) -> bool:
    """Whether the cluster's broker is one known to hold a waiting fetch to its end."""
    return bool(cluster_id) and str(cluster_id).lower().startswith(_HOLDING_CLUSTERS)


def fetch_wait_ms(configured: float | None, cluster_id: str | None) -> int:
    """``fetch.wait.max.ms`` for a cluster: the configured value, else one fitted to its broker."""
    if configured:
        return max(1, round(configured))
    return HOLDING_WAIT_MS if broker_holds_fetches(cluster_id) else ANSWERING_WAIT_MS


class Linger:
    """Whether the records just fetched wait for more: only when the fetch brought many (the topic is busy)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def after(self, records: int) -> float:
        """Seconds to wait for more records after a fetch that brought ``records``."""
        return self.seconds if records >= BUSY_RECORDS else 0.0
