"""Reading the gateway's Prometheus text (``/metrics``) in tests."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.support.polling import condition_wait_async


def metrics_parse(text: str, topic: str | None = None) -> dict[str, float]:
    """``{name: value}`` of the unlabelled series, or with ``topic`` of those labelled ``{topic="<topic>"}`` alone."""
    label = f'{{topic="{topic}"}} ' if topic else " "
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, found, value = line.partition(label)
        if found and "{" not in name:
            out[name] = float(value)
    return out


async def metrics_read(http: httpx.AsyncClient, topic: str | None = None) -> dict[str, float]:
    """GET ``/metrics`` from the gateway ``http`` talks to and parse it as ``metrics_parse`` does."""
    return metrics_parse((await http.get("/metrics")).text, topic)


async def metric_wait(
    http: httpx.AsyncClient, name: str, topic: str | None, ok: Callable[[float], bool], *, within: float
) -> float:
    """Poll ``/metrics`` until ``name{topic}`` (without ``topic``: the unlabelled ``name``; 0 while absent)
    satisfies ``ok``; its value then."""
    last = 0.0

    async def reached() -> bool:
        nonlocal last
        last = (await metrics_read(http, topic)).get(name, 0.0)
        return ok(last)

    await condition_wait_async(
        reached, within=within, what=lambda: f"{name}{{topic={topic}}}, stuck at {last}", interval=0.05
    )
    return last
