"""Waiting in tests: poll a condition until it holds, and fail at a deadline (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


def _describe(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def condition_wait(condition: Callable[[], T], *, within: float, what: str, interval: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy, and return that; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(interval)


@overload
async def condition_wait_async(
    condition: Callable[[], Awaitable[T]], *, within: float, what: str | Callable[[], str], interval: float = ...
) -> T: ...


@overload
async def condition_wait_async(
    condition: Callable[[], T], *, within: float, what: str | Callable[[], str], interval: float = ...
) -> T: ...


async def condition_wait_async(
    condition: Callable[[], Any],
    *,
    within: float,
    what: str | Callable[[], str],
    interval: float = 0.02,
) -> Any:
    """``condition_wait`` on the event loop: ``condition`` may be async, ``what`` a callable read on failure."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {_describe(what)}")
        await asyncio.sleep(interval)
