"""Keep-alives for a hub's quiet streams, with a checkpoint when their progress moved silently (SPEC 2.4).

At 100,000 streams and the default 15 s, the gateway writes 6,667 keep-alives a second: the sweep is
one pass over the streams the wheel has due. A plain keep-alive is framed once for the whole sweep and
written to each direct flow with one call (:meth:`~streams.fanout.sinks.Flow.write_shared`); the
streams written are put back in the wheel together, one slot per heartbeat interval.
"""

from __future__ import annotations

import time

from streams.core.ids import progress_encode
from streams.core.sse import HEARTBEAT, checkpoint_frame
from streams.fanout.sinks import FlowSink, SharedFrames
from streams.fanout.state import HubControl, HubState
from streams.fanout.subscriber import Subscriber
from streams.fanout.wheel import HeartbeatWheel

# A keep-alive may go out this much before it is due: the ticker's second is not exactly a second,
# and one that came a hair early would otherwise wait for the next tick.
HEARTBEAT_EARLY = 0.1


def keepalives_send(beats: HeartbeatWheel[Subscriber], state: HubState, control: HubControl, now: float) -> None:
    """Write each stream ``beats`` has due by ``now`` that wrote nothing since a keep-alive; cut those it overflows."""
    due_subs = beats.due(now)
    if not due_subs:
        return
    beat = SharedFrames(HEARTBEAT)
    token = state.progress.token  # the hub's, for every live stream (a catching-up one has its positions)
    monotonic = time.monotonic
    written: dict[float, list[Subscriber]] = {}  # by heartbeat interval: put back in the wheel together
    for sub in due_subs:
        sink = sub.sink
        due = sink.last_write + sub.heartbeat_seconds
        if now < due - HEARTBEAT_EARLY:  # it wrote since: due later
            beats.schedule(sub, due)
            continue
        if sink.congested():  # it has not taken the last bytes: no point adding more yet
            beats.schedule(sub, now + 1)
            continue
        current = token if sub.positions is None else progress_encode(sub.positions)
        conflated = sub.conflated
        # A conflated stream owed records keeps its progress: it may not pass them.
        if current != sub.sent_progress and (conflated is None or not conflated.owes(sub)):
            sub.sent_progress = current
            taken = sink.write(b":\n" + checkpoint_frame(current))
        elif type(sink) is FlowSink:  # the server's own flow: one call, the keep-alive framed once
            sink.last_write = monotonic()
            sink.flow.write_shared(beat)
            taken = True
        else:
            taken = sink.write(HEARTBEAT)
        if not taken:
            control.cut(sub)
            continue
        written.setdefault(sub.heartbeat_seconds, []).append(sub)
    for seconds, subs in written.items():
        beats.schedule_all(subs, now + seconds)
