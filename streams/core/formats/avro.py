"""One Avro body read with its writer schema: exactly one value, every varint within Avro's 64 bits.

Avro's ``int`` and ``long`` (and every length, count and index) are zigzag varints of a
64-bit value: at most 10 bytes, the tenth holding only bit 63. fastavro reads a varint
of any length: its compiled reader keeps what lands in 64 bits (``80 80 80 80 80 80 80
80 80 04``, 2**65 zigzagged, reads as 0; an 11-byte one wraps by its shift), its
Python reader gives an integer of any size. Here such a varint makes the record
malformed (:class:`Undecodable`): a wrapped number would go out as another value.

A varint too long or beyond 64 bits holds nine bytes with the high bit set followed by
a byte above 1, so a body without that run cannot hold one and is read by the compiled
reader. A body with it (also long non-ASCII text or some doubles) is read by the compiled
reader too, and its value written back by the compiled writer: the same bytes show that
no varint was wrapped, as the writer never writes one longer than 10 bytes or beyond 64
bits. Other bytes (a wrapped varint, a padded one, another union branch, a block with its
size) are read again by fastavro's Python reader with a decoder that checks every varint:
a slower read, never another value.

Schemas that nest themselves (or name a type they do not define) are always read by
the Python reader, whose depth Python bounds: fastavro's compiled reader has no bound
and crashes the process on a value nested a few thousand levels deep.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any

from streams.core.formats.registry import Undecodable

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# Each byte as one letter: "h" continues a varint (high bit set), "l" ends one at 0 or 1, "m" is any
# other. Nine "h" then an "h" (an eleventh byte) or an "m" (bits beyond the 64th) is where a
# malformed varint can be, and nowhere else. A translation and a count cost a quarter of a
# regular expression's search (0.3 against 1.3 µs on 74 bytes).
_LETTERS = bytes(ord("l") if byte < 2 else ord("m") if byte < 0x80 else ord("h") for byte in range(256))
_HIGH = ord("h")


def _may_hold_a_long_varint(data: bytes) -> bool:
    letters = data.translate(_LETTERS)
    return letters.count(_HIGH) >= 9 and (b"hhhhhhhhhh" in letters or b"hhhhhhhhhm" in letters)


_LONG_BYTES = 10


class VarintOverflow(ValueError):
    """A varint longer than 10 bytes, or holding bits beyond the 64th."""


@functools.cache
def _strict_decoder_class() -> type:
    from fastavro.io.binary_decoder import BinaryDecoder

    class StrictDecoder(BinaryDecoder):
        """fastavro's Python decoder, with Avro's 64-bit bound on every varint."""

        def read_long(self) -> int:
            chunk = self.fo.read(_LONG_BYTES)
            length = next((at + 1 for at, byte in enumerate(chunk) if not byte & 0x80), 0)
            if not length:
                if len(chunk) < _LONG_BYTES:
                    raise EOFError
                raise VarintOverflow("a varint longer than 10 bytes")
            if length == _LONG_BYTES and chunk[-1] > 1:
                raise VarintOverflow("a varint beyond 64 bits")
            self.fo.seek(length - len(chunk), io.SEEK_CUR)
            number = 0
            for shift, byte in enumerate(chunk[:length]):
                number |= (byte & 0x7F) << (7 * shift)
            return (number >> 1) ^ -(number & 1)

        read_int = read_long

    return StrictDecoder


class AvroBody:
    """Reads Avro bodies written with one schema (fastavro's parsed form)."""

    def __init__(self, schema: Any) -> None:
        from fastavro import parse_schema, schemaless_reader, schemaless_writer
        from fastavro._read_py import read_data

        self.schema = schema
        self._named: dict[str, dict[str, Any]] = {"writer": {}, "reader": {}}
        parse_schema(schema, self._named["writer"])
        self._read_data = read_data
        self._decoder = _strict_decoder_class()
        self._compiled: Callable[..., Any] | None = None if avro_nests_itself(schema) else schemaless_reader
        self._write: Callable[..., Any] = schemaless_writer

    def read(self, payload: io.BytesIO, what: str) -> Any:
        """The value of the rest of ``payload``, which must end where it ends; :class:`Undecodable` otherwise."""
        try:
            compiled = self._compiled
            if compiled is not None and not _may_hold_a_long_varint(data := payload.getvalue()):
                value = compiled(payload, self.schema, None, False)
            elif compiled is None or (value := self._compiled_confirmed(payload, data)) is _UNCONFIRMED:
                value = self._read_data(self._decoder(payload), self.schema, self._named, None, _PYTHON_OPTIONS)
        except Exception as exc:  # EOFError, a bad union index or length, RecursionError, bad UTF-8, a varint
            raise Undecodable(f"{what}: {type(exc).__name__}: {exc}") from exc
        if payload.read(1):
            raise Undecodable(f"{what}: bytes after the value")
        return value

    def _compiled_confirmed(self, payload: io.BytesIO, data: bytes) -> Any:
        """The compiled reader's value if the compiled writer gives back the body's bytes; else rewinds."""
        start = payload.tell()
        try:
            value = self._compiled(payload, self.schema, None, False)  # type: ignore[misc]
            written = io.BytesIO()
            self._write(written, self.schema, value)
            if written.getbuffer() == memoryview(data)[start:]:
                return value
        except Exception:  # the checked read below names what is wrong
            pass
        payload.seek(start)
        return _UNCONFIRMED


_UNCONFIRMED = object()

# What fastavro's Python ``schemaless_reader`` passes by default.
_PYTHON_OPTIONS = {
    "return_record_name": False,
    "return_record_name_override": False,
    "handle_unicode_errors": "strict",
    "return_named_type": False,
    "return_named_type_override": False,
}


def avro_nests_itself(schema: Any, enclosing: frozenset[str] = frozenset()) -> bool:
    """Whether a parsed Avro schema holds a named type inside itself (or names one it does not define)."""
    if isinstance(schema, str):
        return schema not in _PRIMITIVES
    if isinstance(schema, list):
        return any(avro_nests_itself(branch, enclosing) for branch in schema)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind in ("record", "error"):
        inner = enclosing | {schema.get("name", "")}
        return any(avro_nests_itself(field.get("type"), inner) for field in schema.get("fields", ()))
    if kind == "array":
        return avro_nests_itself(schema.get("items"), enclosing)
    if kind == "map":
        return avro_nests_itself(schema.get("values"), enclosing)
    if kind in ("enum", "fixed"):
        return False
    return avro_nests_itself(kind, enclosing)
