"""Stopping a running pipeline at the end of a micro-batch, and what a cut batch says to Spark."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from pipeline.stopping import BatchCut, BatchEndStop, stop_signals_caught


@dataclass
class FakeQuery:
    active: bool = True
    stopped_at: list[float] = field(default_factory=list)

    @property
    def isActive(self) -> bool:
        return self.active

    def stop(self) -> None:
        self.stopped_at.append(time.monotonic())
        self.active = False


def test_signals_set_the_event_and_the_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_signals_caught() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_finished_batch_is_held_until_the_query_is_stopped() -> None:
    stopper, query = BatchEndStop(), FakeQuery()
    stopper.query = query
    stopper.batch_ended()  # no stop asked for: returns at once
    returned_at: list[float] = []

    def batch() -> None:
        stopper.requested.wait(5)
        stopper.batch_ended()
        returned_at.append(time.monotonic())

    thread = threading.Thread(target=batch)
    thread.start()
    stopper.stop(query, batch_within=5)
    thread.join(5)
    assert query.stopped_at
    assert returned_at
    assert returned_at[0] >= query.stopped_at[0]  # no new batch could begin before the stop


def test_with_no_batch_the_query_is_stopped_after_the_wait() -> None:
    stopper, query = BatchEndStop(), FakeQuery()
    started = time.monotonic()
    stopper.stop(query, batch_within=0.2)
    assert query.stopped_at
    assert query.stopped_at[0] - started >= 0.2


class FakeBatch:
    class sparkSession:
        class sparkContext:
            @staticmethod
            def getLocalProperty(name: str) -> str:
                assert name == "spark.jobGroup.id"
                return "run-1234"


def test_a_cut_batch_fails_short_in_the_words_spark_takes_for_a_stop() -> None:
    stopper = BatchEndStop()
    batch: Any = FakeBatch()
    stopper.batch_failed(batch, 7)  # no stop asked for: the batch's own error goes on
    stopper.requested.set()

    def cut_batch() -> None:
        try:
            raise RuntimeError("py4j.protocol.Py4JJavaError: An error occurred while calling o1.collect" + "x" * 10_000)
        except RuntimeError:
            stopper.batch_failed(batch, 7)

    with pytest.raises(BatchCut) as raised:
        cut_batch()
    message = str(raised.value)
    assert "org.apache.spark.SparkException" in message
    assert "cancelled" in message
    assert "run-1234" in message
    assert raised.value.__suppress_context__  # the long trace of the cut job is not passed on
