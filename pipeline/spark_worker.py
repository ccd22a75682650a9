"""Spark's reused Python workers, made cheap to hand a task: zip archives re-read only when they change.

Before every task (and every data source planning call) Spark's Python worker calls
``importlib.invalidate_caches()``. On Python 3.10 and 3.11 a ``zipimporter`` answers that by reading
its archive's whole directory again, and every Spark worker has ``pyspark.zip`` (3 MB, some
1,000 files) and py4j's zip on its path: 59 ms per call on an idle machine here, several times
that on a busy one, paid by each Python task of a micro-batch (py-spy: 84 % of a busy worker's
samples were in ``zipimporter._read_directory``). :func:`zip_invalidation_lazy` makes a
zipimporter re-read its archive only when the file's size or modification time changed, which is
what the invalidation is for (an archive replaced on disk). Python 3.12 made the re-read lazy
itself (CPython issue gh-103200, found through Spark).

Every Python worker of a pipeline loads :mod:`pipeline.kafka_write` (the data source imports it
too), whose import calls :func:`zip_invalidation_lazy`. No Django import here.
"""

from __future__ import annotations

import os
import sys
import zipimport
from collections.abc import Callable
from typing import Any

_LAZY_MARK = "_sluice_lazy"
_STAT_ATTRIBUTE = "_sluice_archive_stat"


def _archive_stat(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def invalidation_lazy(reread: Callable[[Any], None]) -> Callable[[Any], None]:
    """``zipimporter.invalidate_caches`` that calls ``reread`` only when the archive changed on disk."""

    def invalidate_caches(importer: Any) -> None:
        seen = _archive_stat(importer.archive)
        if seen is not None and getattr(importer, _STAT_ATTRIBUTE, None) == seen:
            return
        reread(importer)
        setattr(importer, _STAT_ATTRIBUTE, seen)

    setattr(invalidate_caches, _LAZY_MARK, True)
    return invalidate_caches


def zip_invalidation_lazy() -> None:
    """Install :func:`invalidation_lazy` on ``zipimport.zipimporter`` (once; from Python 3.12 it is lazy already)."""
    if sys.version_info >= (3, 12):
        return
    current = zipimport.zipimporter.invalidate_caches
    if getattr(current, _LAZY_MARK, False):
        return
    setattr(zipimport.zipimporter, "invalidate_caches", invalidation_lazy(current))  # noqa: B010
