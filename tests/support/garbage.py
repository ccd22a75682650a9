"""What a piece of code leaves for the cycle collector: objects that refer to each other and nothing else.

A gateway collects its old generation every few minutes only (``streams/server/collector.py``), so
such objects stay in memory that long: per request or per stream, that is a gateway's RSS growing
under churn (docs/reliability.md, "A long run").
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """Yield a list that, after the block, holds every object that became cyclic garbage inside it.

    The collector is off in the block, so nothing it frees escapes the count; after it, one
    collection keeps what it finds (``DEBUG_SAVEALL``) instead of freeing it.
    """
    gc.collect()
    gc.disable()
    found: list[object] = []
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found.extend(gc.garbage)
            gc.garbage.clear()
        finally:
            gc.set_debug(0)
            gc.enable()


def of_types(objects: list[object], *types: type) -> list[str]:
    """The type names of ``objects`` that are instances of ``types`` (what an assertion shows)."""
    return sorted(type(o).__qualname__ for o in objects if isinstance(o, types))
