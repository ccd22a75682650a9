"""Keep-alives for a hub's quiet streams, with a checkpoint when their progress moved silently (SPEC 2.4)."""

from __future__ import annotations

from streams.core.ids import progress_encode
from streams.core.sse import HEARTBEAT, checkpoint_frame
from streams.fanout.state import HubControl, HubState
from streams.fanout.subscriber import Subscriber
from streams.fanout.wheel import HeartbeatWheel

# A keep-alive may go out this much before it is due: the ticker's second is not exactly a second,
# and one that came a hair early would otherwise wait for the next tick.
HEARTBEAT_EARLY = 0.1


def keepalives_send(beats: HeartbeatWheel[Subscriber], state: HubState, control: HubControl, now: float) -> None:
    """Write each stream ``beats`` has due by ``now`` that wrote nothing since a keep-alive; cut those it overflows."""
    for sub in beats.due(now):
        due = sub.sink.last_write + sub.heartbeat_seconds
        if now < due - HEARTBEAT_EARLY:  # it wrote since: due later
            beats.schedule(sub, due)
            continue
        if sub.sink.congested():  # it has not taken the last bytes: no point adding more yet
            beats.schedule(sub, now + 1)
            continue
        current = state.progress.token if sub.positions is None else progress_encode(sub.positions)
        conflated = sub.conflated
        if conflated is not None and conflated.owes(sub):
            data = HEARTBEAT  # records wait for its next write: its progress may not pass them
        elif current != sub.sent_progress:
            sub.sent_progress = current
            data = b":\n" + checkpoint_frame(current)
        else:
            data = HEARTBEAT
        if sub.sink.write(data):
            beats.schedule(sub, now + sub.heartbeat_seconds)
        else:
            control.cut(sub)
