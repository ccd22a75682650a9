"""What a query's checkpoint says before it starts: whether its last planned batch was committed.

Spark writes a batch's offsets before running it and a commit after. A batch with offsets and no
commit was interrupted, and the next start runs it again from those offsets first. A query started
with ``availableNow`` then ends after that replay without asking the source what arrived since
(Spark 4.0; documented for ``Trigger.Once``), so a ``--once`` run that replays is run a second
time (:func:`pipeline.job.pipeline_run`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def batch_replayed(spark: SparkSession, location: str) -> int | None:
    """The id of the batch a query on the checkpoint at ``location`` runs again first, or ``None``.

    Read through Hadoop's file system, so a checkpoint on HDFS or an object store is read as Spark reads it.
    """
    jvm: Any = spark._jvm
    root = jvm.org.apache.hadoop.fs.Path(location)
    files = root.getFileSystem(spark._jsc.hadoopConfiguration())
    planned, committed = _last_batch(jvm, files, root, "offsets"), _last_batch(jvm, files, root, "commits")
    return planned if planned is not None and (committed is None or committed < planned) else None


def _last_batch(jvm: Any, files: Any, root: Any, log: str) -> int | None:
    path = jvm.org.apache.hadoop.fs.Path(root, log)
    if not files.exists(path):
        return None
    ids = [int(name) for status in files.listStatus(path) if (name := status.getPath().getName()).isdigit()]
    return max(ids, default=None)
