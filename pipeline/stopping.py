"""Stopping a running pipeline on SIGTERM or SIGINT without cutting a micro-batch in half.

``query.stop()`` cancels the batch's Spark jobs, so a batch in flight fails inside its
``foreachBatch`` function; Spark then matches the Python traceback it gets back against a
regular expression that overflows the stack on long messages (``StackOverflowError`` and a
thousand-line trace in the job's log). Here the driver stops the query while the function
holds a finished batch: the query is marked stopped before the function returns, so no new
batch begins and none is cut. A batch that does not end in time is cut all the same, and
its function then fails with :class:`BatchCut`, a short message that Spark takes for the
cancelled job of a stopping query (it looks for ``SparkException``, ``cancelled`` and the
query's job group), so the query ends as stopped, with nothing in the log.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

# How long a finished batch waits for the driver to stop the query (a bound, should the driver be gone).
PARK_SECONDS = 10.0
_PARK_POLL_SECONDS = 0.02


class Stoppable(Protocol):
    @property
    def isActive(self) -> bool: ...

    def stop(self) -> None: ...


@contextmanager
def stop_signals_caught() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT set the event instead of raising, for the duration (main thread only).

    PySpark's own SIGINT handler cancels the jobs over py4j and raises ``KeyboardInterrupt``
    inside whatever py4j call the driver is blocked in: that call's connection is then
    mid-answer, and every later call (stopping the query, removing a listener) fails with
    a traceback. Setting a flag lets the driver stop the query between two short waits.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def caught(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, caught) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class BatchCut(Exception):
    """A micro-batch cut short by the query's stop; it is repeated when the pipeline starts again."""


def _not_a_cut(record: logging.LogRecord) -> bool:
    # py4j logs each exception of a Python callback with its traceback; a cut is expected.
    return not (record.exc_info and isinstance(record.exc_info[1], BatchCut))


class BatchEndStop:
    """The query is stopped at the end of a micro-batch: :meth:`batch_ended` holds it, :meth:`stop` stops."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._parked = threading.Event()
        self.query: Stoppable | None = None
        py4j_logger = logging.getLogger("py4j.clientserver")
        if _not_a_cut not in py4j_logger.filters:
            py4j_logger.addFilter(_not_a_cut)

    def batch_ended(self) -> None:
        """In the ``foreachBatch`` function after its writes: once a stop is asked for, wait for it."""
        query = self.query
        if query is None or not self.requested.is_set():
            return
        self._parked.set()
        deadline = time.monotonic() + PARK_SECONDS
        while query.isActive and time.monotonic() < deadline:
            time.sleep(_PARK_POLL_SECONDS)

    def batch_failed(self, batch: Any, batch_id: int) -> None:
        """In the ``foreachBatch`` function, when the batch raised: :class:`BatchCut` if the stop cut it."""
        if not self.requested.is_set():
            return
        # The job group Spark compares with: the query's run id, set on the thread that runs the batch.
        group = batch.sparkSession.sparkContext.getLocalProperty("spark.jobGroup.id")
        raise BatchCut(
            f"org.apache.spark.SparkException: batch {batch_id} cancelled: job group {group} stopped"
        ) from None

    def stop(self, query: Stoppable, batch_within: float) -> None:
        """Stop ``query`` while a finished batch is held, or at once if none ends within ``batch_within`` seconds.

        A query with no new data runs no batch; its stop has none to cut.
        """
        if query.isActive:
            self.requested.set()
            self._parked.wait(batch_within)
            query.stop()
