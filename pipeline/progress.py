"""What a pipeline's micro-batches did (:class:`BatchProgress`) and where their time went (:class:`BatchTiming`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener


@dataclass(frozen=True)
class BatchProgress:
    """What one micro-batch did."""

    batch_id: int
    records_in: int
    records_valid: int
    records_invalid: int
    rules: dict[str, int]

    def __str__(self) -> str:
        rules = ", ".join(f"{rule} {count}" for rule, count in sorted(self.rules.items()))
        line = (
            f"batch {self.batch_id}: {self.records_in} in, {self.records_valid} valid, {self.records_invalid} invalid"
        )
        return f"{line} ({rules})" if rules else line


@dataclass(frozen=True)
class BatchTiming:
    """Where one micro-batch's time went, as Spark's progress reports it (``durationMs``, in ms).

    ``triggerExecution`` is the whole batch; ``latestOffset`` and ``getBatch`` ask the source,
    ``queryPlanning`` plans it, ``walCommit`` and ``commitOffsets`` write the checkpoint,
    ``addBatch`` is the ``foreachBatch`` (validate, count, shape, write).
    """

    batch_id: int
    rows: int
    durations: dict[str, int]

    # The parts in the order a batch goes through them.
    PARTS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")

    def __str__(self) -> str:
        parts = ", ".join(f"{name} {self.durations[name]}" for name in self.PARTS if name in self.durations)
        total = self.durations.get("triggerExecution", 0)
        return f"batch {self.batch_id} timing: {total} ms for {self.rows} rows ({parts})"


class TimingListener(StreamingQueryListener):
    """Hands each batch of one query that read records to ``on_timing``, once, as soon as Spark reports it.

    Spark's listener bus delivers progress asynchronously; :meth:`flush` reports what it had not
    delivered when the query ended, from the query's own record of its recent batches.
    """

    def __init__(self, query_name: str, on_timing: Callable[[BatchTiming], None]) -> None:
        self.query_name = query_name
        self.on_timing = on_timing
        self.reported: set[int] = set()
        self.lock = threading.Lock()

    def report(self, progress: Any) -> None:
        if progress.name != self.query_name or not progress.numInputRows:
            return
        with self.lock:
            if progress.batchId in self.reported:
                return
            self.reported.add(progress.batchId)
        durations = {str(k): int(v) for k, v in progress.durationMs.items()}
        self.on_timing(BatchTiming(int(progress.batchId), int(progress.numInputRows), durations))

    def flush(self, query: StreamingQuery) -> None:
        for progress in query.recentProgress:
            self.report(progress)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.report(event.progress)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
