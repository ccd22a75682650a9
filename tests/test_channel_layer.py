"""The channel layer configured from the environment works (Redis in CI's services pass)."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from django.conf import settings

pytestmark = pytest.mark.services


async def test_channel_layer_round_trip() -> None:
    layer = get_channel_layer()
    assert layer is not None
    expected = (
        "RedisChannelLayer"
        if settings.CHANNEL_LAYERS["default"]["BACKEND"].endswith("RedisChannelLayer")
        else "InMemoryChannelLayer"
    )
    assert type(layer).__name__ == expected
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "sluice.ping", "n": 1})
    assert await layer.receive(channel) == {"type": "sluice.ping", "n": 1}
