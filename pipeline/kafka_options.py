"""Options of the ``sluice-kafka`` data source, by the names Spark hands over: lower case.

Spark keeps a data source's options in a case-insensitive map and gives them to Python with
their names lower-cased: ``.option("startingOffsets", "latest")`` arrives as ``startingoffsets``.
So names are looked up in lower case here, and options given from Python (the pipeline's own
producing tasks, tests) are lower-cased on the way in, whatever case they were written in.

No Django import here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

from collections.abc import Mapping

# Documented as startingOffsets, minRecordsPerTask, readTimeoutSeconds, flushTimeoutSeconds.
STARTING_OFFSETS_OPTION = "startingoffsets"
MIN_RECORDS_PER_TASK_OPTION = "minrecordspertask"
READ_TIMEOUT_OPTION = "readtimeoutseconds"
FLUSH_TIMEOUT_OPTION = "flushtimeoutseconds"
# librdkafka properties of the consumers and producers, given as ``kafka.<property>``.
KAFKA_PREFIX = "kafka."


def options_lowered(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with the names Spark would give them (a name given twice in two cases: the last one wins)."""
    return {name.lower(): value for name, value in options.items()}


def kafka_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka properties among ``options`` (``kafka.*``, the prefix removed)."""
    return {name[len(KAFKA_PREFIX) :]: value for name, value in options.items() if name.startswith(KAFKA_PREFIX)}
