"""Compact JSON text for decoded records, with Avro's logical types in their JSON form.

Bytes and fixed become base64, decimals strings (exact), timestamps, dates and
times ISO-8601 (UTC written ``Z``), UUIDs their text.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import Any


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


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_default).encode


def json_compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON."""
    return _encode(value).encode("utf-8")


def key_text(value: Any) -> bytes:
    """What key filters compare a decoded key with: a string's text, anything else's compact JSON."""
    if isinstance(value, str):
        return value.encode("utf-8")
    return json_compact(value)
