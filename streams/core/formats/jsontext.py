"""Compact JSON text for decoded records, with Avro's logical types in their JSON form.

Bytes and fixed become base64, decimals strings (exact), timestamps, dates and
times ISO-8601 (UTC written ``Z``), UUIDs their text. orjson writes it: a sixteenth
of the standard library's time for a typical record (``bench/formats.py``), and
this runs once for every record of every decoded topic.

JSON records (``json`` and ``jsonschema``) keep their text: :func:`json_compacted`
checks it and drops the whitespace between tokens, so numbers go out as written
(``18446744073709551616``, ``1e400``, ``0.1000000000000000000001``), which a parse
and a render would change.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
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


class JsonText(bytes):
    """Compact JSON text, numbers as written: a decoded value that goes out as it is."""


# JSON text's pieces without the whitespace between tokens: strings whole, and runs of anything else.
_WHITESPACE = re.compile(rb"[ \t\n\r]")
_PIECES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[^ \t\n\r"]+')


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_parse(data: bytes) -> Any:
    """The value of JSON text (UTF-8); :class:`ValueError` if it is not JSON.

    orjson reads it; what orjson refuses is read again by the standard library, which
    reads numbers orjson cannot hold (``1e400``) and escapes it refuses (a lone
    surrogate such as ``"\\ud800"``, which the JSON grammar allows), numbers kept as text.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        first = exc
    try:
        return json.loads(data.decode("utf-8"), parse_int=str, parse_float=str, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(str(first)) from exc


def json_compacted(data: bytes) -> JsonText:
    """JSON text checked and without whitespace between tokens, everything else as written; :class:`ValueError`.

    Text that orjson writes back byte for byte (compact, as most producers write it)
    takes one parse and one render; any other text is compacted by a scan that keeps
    strings whole (a quarter of the speed, measured by ``bench/formats.py``).
    """
    value = json_parse(data)
    try:
        if orjson.dumps(value) == data:
            return JsonText(data)
    except TypeError:  # an integer beyond 64 bits
        pass
    if _WHITESPACE.search(data) is None:
        return JsonText(data)
    return JsonText(b"".join(_PIECES.findall(data)))


def json_compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (:class:`JsonText` as it is)."""
    if isinstance(value, JsonText):
        return value
    return orjson.dumps(value, default=_default, option=_OPTIONS)


def key_text(value: Any) -> bytes:
    """What key filters compare a decoded key with: a string's text, anything else's compact JSON."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, JsonText) and value[:1] == b'"':
        return key_text(json_parse(value))
    return json_compact(value)
