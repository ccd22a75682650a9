"""Compact JSON text for decoded records, with Avro's logical types in their JSON form.

Bytes and fixed become base64, decimals strings (exact), timestamps, dates and
times ISO-8601 (UTC written ``Z``), UUIDs their text. orjson writes it: a sixteenth
of the standard library's time for a typical record (``bench/formats.py``), and
this runs once for every record of every decoded topic.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import uuid
from typing import Any

import orjson


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def json_compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON."""
    return orjson.dumps(value, default=_default, option=_OPTIONS)


def key_text(value: Any) -> bytes:
    """What key filters compare a decoded key with: a string's text, anything else's compact JSON."""
    if isinstance(value, str):
        return value.encode("utf-8")
    return json_compact(value)
