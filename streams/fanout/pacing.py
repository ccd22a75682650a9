"""How long a topic's fetch waits at the broker, and whether a new record waits for company.

Two settings trade latency against work per delivery, and neither has one right value:

- ``fetch.wait.max.ms``: how long the broker may hold a fetch that found nothing. Kafka
  answers a waiting fetch as soon as a record arrives, so a long wait costs nothing and
  saves empty round trips. Some brokers (tansu, the embedded broker) hold it to the end
  whatever arrives: a record then waits half the setting on average. The wait is fitted
  to the broker: short where it holds fetches, long where it answers early, unless
  ``SLUICE_FETCH_WAIT_MS`` says otherwise. A short wait means a fetch round trip every
  few milliseconds, so a topic that has been quiet for :data:`QUIET_SECONDS` goes back to
  the long wait (:class:`FetchWait`) until its next record: idle topics cost next to
  nothing, and only the first record after a quiet spell waits longer.
- the linger: after a record, how long to wait for more before writing to the streams.
  Batching is what keeps the cost per delivery low under load (one write per stream per
  batch), but when records come one at a time it is only delay. :class:`Linger` sends at
  once when the fetch brought one record or a few, and lingers only when it brought many.
  Nor does it linger while the broker holds the loaded wait (:attr:`FetchWait.batches`):
  the fetch has already gathered what came in that time, and the next one is a wait away,
  so lingering would only add its time to every record (10,000 per-user streams at
  10,000 msg/s: p50 22 ms with it; see docs/benchmarks.md).
"""

from __future__ import annotations

# Cluster ids of brokers that hold a waiting fetch to its end although records arrived.
_HOLDING_CLUSTERS = ("tansu",)
# fetch.wait.max.ms for a broker that holds fetches (a record waits about half of it), to start
# with: 1 ms. A broker that cannot keep up with fetches that short (tansu with a log of millions of
# records) leaves the fetch behind the log's end while its fetches bring little: the topic's short
# wait then doubles (see FetchWait.when_behind). 1 ms is half a millisecond faster than 2 at 100
# clients x 100 msg/s (p50 2.5-2.8 ms against 3.0-3.5 in five runs each; see docs/benchmarks.md).
HOLDING_WAIT_MS = 1
# fetch.wait.max.ms of catch-up reads on a broker that holds fetches. They read what is already in
# the log, which any broker answers at once; the wait only paces the fetches librdkafka keeps
# sending once a reader has reached the log's end. At 1 ms, twenty catch-ups on a partition written
# one record at a time left tansu answering no fetch of the topic at all, the hub's included
# (tests/streams/fanout/test_fanout.py timed out in 5 runs of 14).
HOLDING_BACKLOG_WAIT_MS = 10
# ... and for one that answers as soon as a record arrives.
ANSWERING_WAIT_MS = 100
# Records a fetch must bring at once before the fetcher lingers for more: fewer is not load.
BUSY_RECORDS = 4
# A topic without records for this long is quiet: its fetch goes back to the long wait.
QUIET_SECONDS = 2.0
# fetch.wait.max.ms while fetches keep bringing many records from a broker that holds fetches: a
# record waits about half of it. 10 ms (it was 50, then 20): with no linger on top and the fan-out
# writing per-user streams as it goes, 10,000 per-user streams at 10,000 msg/s had p99 23-32 ms
# against 28-55 ms at 20, and the peak at 100 clients was the same (2.38 against 2.35 million
# deliveries/s; see docs/benchmarks.md).
LOADED_WAIT_MS = 10
# Fetches in a row that must call for another wait before it changes.
STREAK_FETCHES = 20
# Records the fetch may fall behind the log's end before the topic counts as loaded, whatever
# the fetches bring (under a heavy produce load, tansu answers short fetches with little or nothing).
BEHIND_RECORDS = 50
# Once loaded, a topic keeps the loaded wait at least this long (a broker slow to answer short
# fetches is slow for a while: its log is long, or its producers are busy).
LOADED_HOLD_SECONDS = 30.0


def broker_holds_fetches(cluster_id: str | None) -> bool:
    """Whether the cluster's broker is one known to hold a waiting fetch to its end."""
    return bool(cluster_id) and str(cluster_id).lower().startswith(_HOLDING_CLUSTERS)


def fetch_wait_ms(configured: float | None, cluster_id: str | None) -> int:
    """``fetch.wait.max.ms`` for a cluster: the configured value, else one fitted to its broker."""
    if configured:
        return max(1, round(configured))
    return HOLDING_WAIT_MS if broker_holds_fetches(cluster_id) else ANSWERING_WAIT_MS


def backlog_wait_ms(live_ms: int, cluster_id: str | None) -> int:
    """``fetch.wait.max.ms`` of catch-up reads: never shorter than the live fetch's, longer where brokers hold."""
    return max(live_ms, HOLDING_BACKLOG_WAIT_MS) if broker_holds_fetches(cluster_id) else live_ms


class Linger:
    """Whether the records just fetched wait for more: only when the fetch brought many (the topic is busy)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def after(self, records: int) -> float:
        """Seconds to wait for more records after a fetch that brought ``records``."""
        return self.seconds if records >= BUSY_RECORDS else 0.0


class FetchWait:
    """The fetch wait of one topic, as its traffic goes.

    On a broker that holds fetches, three waits: ``busy_ms`` (short) while records come
    a few at a time, so each waits little; :data:`LOADED_WAIT_MS` once fetches keep
    bringing many (at thousands of records a second, fetch round trips every couple of
    milliseconds cost the broker more than they save: the batches are large anyway);
    :data:`ANSWERING_WAIT_MS` once the topic is quiet. A change needs
    :data:`STREAK_FETCHES` fetches in a row that call for it, so a rate near a bound does
    not flap. A fetch found behind the log's end on the short wait although its fetches
    brought few records means the broker cannot answer fetches that short in time: the
    short wait doubles for good (up to the loaded one), so each topic settles on the
    shortest wait its broker keeps up with. Behind while fetches bring many is the rate,
    not the broker: the loaded wait, and the short one unchanged.
    On other brokers the wait is long and never changes. ``when_idle``, ``when_behind``
    and ``when_records`` say when the fetcher should remake its consumer (None: keep it).
    """

    __slots__ = ("busy_ms", "current_ms", "heavy", "last_record", "light", "loaded_ms", "loaded_until", "quiet_ms")

    def __init__(self, busy_ms: int) -> None:
        self.busy_ms = busy_ms
        self.quiet_ms = max(busy_ms, ANSWERING_WAIT_MS)
        self.loaded_ms = max(busy_ms, LOADED_WAIT_MS)
        self.current_ms = busy_ms
        self.last_record = 0.0
        self.heavy = 0  # fetches in a row that brought many records
        self.light = 0  # fetches in a row that brought a few
        self.loaded_until = 0.0  # no going back to the short wait before this

    @property
    def batches(self) -> bool:
        """Whether the broker holds the loaded wait: each fetch gathers that long, no linger needed."""
        return self.current_ms == self.loaded_ms and self.loaded_ms != self.busy_ms

    def when_idle(self, now: float) -> int | None:
        """A poll found nothing: the quiet wait, if the topic has just become quiet."""
        if self.current_ms != self.quiet_ms and now - self.last_record >= QUIET_SECONDS:
            self.heavy = self.light = 0
            return self.quiet_ms
        return None

    def when_behind(self, records: int, now: float) -> int | None:
        """The fetch is ``records`` behind the log's end: the loaded wait, if it is behind on a short one."""
        if records >= BEHIND_RECORDS and self.current_ms == self.busy_ms and self.loaded_ms != self.busy_ms:
            if not self.heavy:
                # Behind although the fetches brought few records: the broker, not the rate, is
                # what keeps it behind. The short wait is too short for it: longer from now on.
                self.busy_ms = min(self.busy_ms * 2, self.loaded_ms)
            self.heavy, self.light = STREAK_FETCHES, 0
            self.loaded_until = now + LOADED_HOLD_SECONDS
            return self.loaded_ms
        return None

    def when_records(self, now: float, records: int = 1) -> int | None:
        """A fetch brought ``records``: the wait the topic's traffic calls for, if it changed."""
        self.last_record = now
        if records >= BUSY_RECORDS:
            self.heavy, self.light = self.heavy + 1, 0
        else:
            self.heavy, self.light = 0, self.light + 1
        wanted = self.current_ms
        if self.current_ms == self.quiet_ms and self.quiet_ms != self.busy_ms:
            wanted = self.busy_ms  # the first records after a quiet spell
        elif self.heavy >= STREAK_FETCHES:
            if self.current_ms != self.loaded_ms:
                self.loaded_until = now + LOADED_HOLD_SECONDS
            wanted = self.loaded_ms
        elif self.light >= STREAK_FETCHES and self.current_ms != self.busy_ms and now >= self.loaded_until:
            wanted = self.busy_ms
        return wanted if wanted != self.current_ms else None
