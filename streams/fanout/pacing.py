"""How long a topic's fetch waits at the broker, and whether a new record waits for company.

The rules and their inputs, in one table: docs/operations.md, "Fetch pacing". Two settings trade
latency against work per delivery, and neither has one right value:

- ``fetch.wait.max.ms``: how long the broker may hold a fetch that found nothing. Kafka
  answers a waiting fetch as soon as a record arrives, so a long wait costs nothing and
  saves empty round trips. Some brokers (tansu, the embedded broker) hold it to the end
  whatever arrives: a record then waits half the setting on average. There the wait
  follows what is measured now (:class:`FetchWait`): short while records come a few at a
  time and close together, a fraction of the gap between records while they come far apart,
  longer under load, longer still while the broker is slow to answer, long while the topic is
  quiet; nothing from earlier load is kept.
- the linger: after a record, how long to wait for more before writing to the streams.
  Batching is what keeps the cost per delivery low under load (one write per stream per
  batch), but when records come one at a time it is only delay. :class:`Linger` sends at
  once when the fetch brought one record or a few, and lingers only when it brought many.
  Nor does it linger on the loaded wait or a longer one (:attr:`FetchWait.batches`):
  the fetch has already gathered what came in that time, and the next one is a wait away,
  so lingering would only add its time to every record (10,000 per-user streams at
  10,000 msg/s: p50 22 ms with it; see docs/benchmarks.md).
"""

from __future__ import annotations

# Cluster ids of brokers that hold a waiting fetch to its end although records arrived.
_HOLDING_CLUSTERS = ("tansu",)
# fetch.wait.max.ms for a broker that holds fetches (a record waits about half of it), to start
# with: 1 ms. A broker that cannot keep up with fetches that short (tansu with a log of millions of
# record batches) answers them slowly: the wait then follows its answers (FetchWait.when_measured).
# 1 ms is half a millisecond faster than 2 at 100
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
# Records a fetch must bring at once before the fetcher lingers for more, and counts as heavy: fewer is not load.
BUSY_RECORDS = 4
# A topic without records for this long is quiet: its fetch goes back to the long wait.
QUIET_SECONDS = 2.0
# fetch.wait.max.ms while fetches keep bringing many records from a broker that holds fetches: a
# record waits about half of it. 10 ms (it was 50, then 20): with no linger on top and the fan-out
# writing per-user streams as it goes, 10,000 per-user streams at 10,000 msg/s had p99 23-32 ms
# against 28-55 ms at 20, and the peak at 100 clients was the same (2.38 against 2.35 million
# deliveries/s; see docs/benchmarks.md).
LOADED_WAIT_MS = 10
# A topic whose records come far apart fetches with at most 1 / SPARSE_FETCHES of the gap between them
# (rounded down to WAIT_STEPS_MS, between the short wait and the quiet one): a record then costs the
# broker at most about SPARSE_FETCHES empty fetches (2.5 times that where the rounding takes most) and
# waits at most the wait, instead of a thousand 1 ms fetches a second between records at 1 msg/s.
# 1 msg/s: 50 ms (20 fetches a record); 10 msg/s: 5 ms; 32 msg/s and more: the short wait.
SPARSE_FETCHES = 16
# Fetches with records, in a row, whose gaps must all be long before the wait lengthens: the shortest
# of their gaps counts, so one fetch that finds records close together brings the short wait back at once.
SPARSE_POLLS = 3
# Fetches in a row that must bring many (or few) records before the topic counts as loaded (or not).
STREAK_FETCHES = 20
# Records the fetch may fall behind the log's end before the topic counts as loaded, whatever
# the fetches bring (under a heavy produce load, tansu answers short fetches with little or nothing).
# Measured every _WATERMARKS_SECONDS and after each poll that brought nothing; the longer wait is
# taken at once: tansu cuts its search of a partition's record batches at the fetch's wait, so on a
# long log a 1 ms wait brings nothing at all until it lengthens (the ramp's steps: docs/benchmarks.md).
BEHIND_RECORDS = 50
# How often librdkafka reports the fetches' round trips (its statistics), in ms.
MEASURE_MS = 1000
# A broker that takes longer than this to answer a fetch (its round trip less the wait) is slow:
# the wait becomes at least SLOW_FACTOR times its answer, so that the topic's fetches take at most
# about 1 / (1 + SLOW_FACTOR) of the broker's time, and the log's producers keep the rest. A fresh
# embedded broker answers in well under a millisecond; one whose log holds many record batches
# takes longer for every fetch (docs/benchmarks.md, "Pacing").
SLOW_ANSWER_MS = 3.0
SLOW_FACTOR = 4
# The waits a slow broker's answer time is rounded up to (fewer consumer remakes than any value).
WAIT_STEPS_MS = (1, 2, 5, 10, 20, 50, 100)
# Measurements in a row that must ask for a shorter wait before a backed-off wait comes down.
EASE_MEASUREMENTS = 2
# The least time between two changes of a wait while records flow (each one remakes the consumer);
# the first records after a quiet spell, and a fetch falling behind the log's end, do not wait for it.
CHANGE_SECONDS = 0.5


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
    """The fetch wait of one topic, from its traffic and its broker's answers; never from before that.

    On a broker that holds fetches the wait is the longest of:

    - the pace of the traffic: ``busy_ms`` (short) while records come a few at a time, so each
      waits little; while they come far apart, a fraction of the gap between them
      (:func:`sparse_wait_ms`: the shortest gap of the last :data:`SPARSE_POLLS` fetches that
      brought records), so that a record costs a bounded number of empty fetches, and at once
      the short wait again when a fetch finds records closer; :data:`LOADED_WAIT_MS` once
      :data:`STREAK_FETCHES` fetches in a row brought many, or the fetch is :data:`BEHIND_RECORDS`
      behind the log's end (at thousands of records a second, round trips every couple of
      milliseconds cost the broker more than they save: the batches are large anyway); back to
      ``busy_ms`` after as many fetches in a row brought few;
      :data:`ANSWERING_WAIT_MS` once the topic is quiet, back at its next record;
    - the broker's pace (``floor_ms``): a broker slow to answer (measured round trips less the
      wait, :meth:`when_measured`) gets :data:`SLOW_FACTOR` times its answer time as a wait, so
      the topic never keeps hammering a broker that cannot keep up; it comes down again once
      :data:`EASE_MEASUREMENTS` measurements in a row found the broker answering faster.

    Nothing else is kept: every input is measured again, so a wait returns to the fast one within
    a few seconds of the load falling. A change remakes the consumer, so changes are at least
    :data:`CHANGE_SECONDS` apart, except the first records after a quiet spell, records that come
    closer, and a fetch that falls :data:`BEHIND_RECORDS` behind the log's end. On other brokers
    the wait is long and never changes. ``when_idle``, ``when_records`` and ``when_measured`` say
    when the fetcher should remake its consumer (None: keep it).
    """

    __slots__ = (
        "adaptive",
        "behind",
        "busy_ms",
        "changed_at",
        "current_ms",
        "easing",
        "floor_ms",
        "gaps",
        "heavy",
        "last_record",
        "light",
        "loaded",
        "loaded_ms",
        "quiet",
        "quiet_ms",
        "sparse_ms",
    )

    def __init__(self, busy_ms: int) -> None:
        self.busy_ms = busy_ms
        self.quiet_ms = max(busy_ms, ANSWERING_WAIT_MS)
        self.loaded_ms = max(busy_ms, LOADED_WAIT_MS)
        self.adaptive = self.quiet_ms != busy_ms  # a broker that answers early keeps one long wait
        self.current_ms = busy_ms
        self.last_record = 0.0
        self.gaps: tuple[float, ...] = ()  # seconds between records, from the last SPARSE_POLLS fetches with records
        self.sparse_ms = busy_ms  # the wait those gaps call for
        self.heavy = 0  # fetches in a row that brought many records
        self.light = 0  # fetches in a row that brought a few
        self.loaded = False
        self.quiet = False
        self.behind = 0  # records between the fetch and the log's end, as last measured
        self.floor_ms = 0  # the broker's pace: no shorter wait while it answers this slowly
        self.easing = 0  # measurements in a row that asked for a lower floor
        self.changed_at = float("-inf")

    @property
    def batches(self) -> bool:
        """Whether the wait is the loaded one or longer: each fetch gathers that long, no linger needed."""
        return self.adaptive and not self.quiet and self.current_ms >= self.loaded_ms

    def wanted_ms(self) -> int:
        """The wait the topic's traffic and its broker's answers call for now."""
        if not self.adaptive:
            return self.current_ms
        if self.quiet:
            return self.quiet_ms
        pace = self.loaded_ms if self.loaded else self.sparse_ms
        return min(self.quiet_ms, max(pace, self.floor_ms))

    def _change(self, now: float, at_once: bool = False) -> int | None:
        wanted = self.wanted_ms()
        if wanted == self.current_ms or (not at_once and now - self.changed_at < CHANGE_SECONDS):
            return None
        self.changed_at = now
        self.current_ms = wanted
        return wanted

    def when_idle(self, now: float) -> int | None:
        """A poll found nothing: the quiet wait, if the topic has just become quiet."""
        if self.adaptive and not self.quiet and now - self.last_record >= QUIET_SECONDS:
            self.quiet, self.loaded = True, False
            self.heavy = self.light = 0
            return self._change(now, at_once=True)
        return self._change(now) if self.adaptive else None

    def when_started(self, now: float) -> None:
        """The fetch starts: the quiet clock and the gap to the first record start now."""
        self.last_record = now

    def when_records(self, now: float, records: int = 1) -> int | None:
        """A fetch brought ``records``: the wait the topic's traffic calls for, if it changed.

        Records that come closer than before bring a shorter wait at once; the rest waits for
        :data:`CHANGE_SECONDS` after the last change.
        """
        since, self.last_record = now - self.last_record, now
        if not self.adaptive or records < 1:
            return None
        if records > 1:  # they came within one wait: that bounds their gap, whatever came before
            since = min(since, self.current_ms / 1000)
        self.gaps = (*self.gaps, since / records)[-SPARSE_POLLS:]
        sparse = self.busy_ms
        if len(self.gaps) == SPARSE_POLLS:
            sparse = sparse_wait_ms(min(self.gaps), self.busy_ms, self.quiet_ms)
        closer, self.sparse_ms = sparse < self.sparse_ms, sparse
        if records >= BUSY_RECORDS:
            self.heavy, self.light = self.heavy + 1, 0
        else:
            self.heavy, self.light = 0, self.light + 1
        if self.quiet:
            self.quiet = False
            return self._change(now, at_once=True)  # the first records after a quiet spell
        if self.heavy >= STREAK_FETCHES:
            self.loaded = True
        elif self.light >= STREAK_FETCHES and self.behind < BEHIND_RECORDS:
            self.loaded = False
        return self._change(now, at_once=closer and self.wanted_ms() < self.current_ms)

    def when_measured(self, now: float, behind: int, answer_ms: float | None = None) -> int | None:
        """The fetch is ``behind`` records from the log's end, and the broker answers in ``answer_ms`` (None: unknown).

        ``answer_ms`` is a fetch's round trip less the wait (the broker's own time). Its floor goes
        up at once, and down after :data:`EASE_MEASUREMENTS` measurements in a row asked for less.
        A fetch :data:`BEHIND_RECORDS` behind takes the longer wait it calls for at once, even within
        :data:`CHANGE_SECONDS` of the last change: the records are there and the fetches do not bring
        them (a wait shorter than tansu's search of a long log brings nothing). A slow answer
        alone waits its turn.
        """
        if not self.adaptive:
            return None
        self.behind = behind
        behind_end = behind >= BEHIND_RECORDS and not self.quiet
        if behind_end:
            self.loaded, self.light = True, 0
        if answer_ms is not None:
            floor = slow_broker_wait_ms(answer_ms)
            if floor >= self.floor_ms:
                self.floor_ms, self.easing = floor, 0
            else:
                self.easing += 1
                if self.easing >= EASE_MEASUREMENTS:
                    self.floor_ms, self.easing = floor, 0
        return self._change(now, at_once=behind_end and self.wanted_ms() > self.current_ms)


def sparse_wait_ms(gap_seconds: float, busy_ms: int, quiet_ms: int) -> int:
    """The wait for records ``gap_seconds`` apart: the longest step within 1 / SPARSE_FETCHES of the gap, in bounds."""
    most = gap_seconds * 1000 / SPARSE_FETCHES
    step = max((step for step in WAIT_STEPS_MS if step <= most), default=busy_ms)
    return min(quiet_ms, max(busy_ms, step))


def slow_broker_wait_ms(answer_ms: float) -> int:
    """The least wait for a broker that answers a fetch in ``answer_ms``: 0 if it is not slow."""
    if answer_ms <= SLOW_ANSWER_MS:
        return 0
    wanted = SLOW_FACTOR * answer_ms
    return next((step for step in WAIT_STEPS_MS if step >= wanted), WAIT_STEPS_MS[-1])


def fetch_answer_ms(stats: dict, wait_ms: int) -> float | None:
    """The brokers' median time to answer a fetch beyond its wait, from librdkafka's statistics (None: no fetches).

    ``rtt`` is librdkafka's window of request round trips per broker since its last report (in
    µs); a consumer's requests are nearly all fetches, which a broker that holds fetches answers
    after the wait. The slowest broker that answered counts.
    """
    answers = [
        broker["rtt"]["p50"] / 1000 - wait_ms
        for broker in stats.get("brokers", {}).values()
        if broker.get("nodeid", -1) >= 0 and broker.get("rtt", {}).get("cnt", 0) > 0
    ]
    return max(0.0, max(answers)) if answers else None
