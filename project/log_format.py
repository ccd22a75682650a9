"""The log lines' formatter: logging's own, with the time of day formatted once a second, not once a line.

``logging.Formatter.formatTime`` calls ``localtime`` and ``strftime`` for every record: a third of the
cost of an access-log line, written for every stream opened and closed (docs/benchmarks.md, admission).
"""

from __future__ import annotations

import logging
import time


class PlainFormatter(logging.Formatter):
    """``logging.Formatter``, its default time (``2026-11-26 22:56:01,123``) cached per second."""

    _second = -1
    _text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        return f"{self._text},{int(record.msecs):03d}"
