"""The event loop under Twisted's asyncio reactor: the standard library's, or uvloop.

daphne installs Twisted's asyncio reactor on a new stdlib loop when it is first
imported (Django imports it with the ``daphne`` app). ``reactor_install`` runs
before that, in ``manage.py``, and installs the reactor on the loop that
``SLUICE_EVENT_LOOP`` names (``asyncio``, the default, or ``uvloop``); daphne
then finds an asyncio reactor in place and keeps it.
"""

from __future__ import annotations

import asyncio
import sys

EVENT_LOOPS = ("asyncio", "uvloop")


class EventLoopError(ValueError):
    """``SLUICE_EVENT_LOOP`` names a loop Sluice cannot run on."""


def reactor_install(name: str) -> None:
    """Install Twisted's asyncio reactor on the named loop (``event_loop_name`` says which one runs)."""
    name = name or "asyncio"
    if name not in EVENT_LOOPS:
        raise EventLoopError(f"SLUICE_EVENT_LOOP={name!r}: expected one of {', '.join(EVENT_LOOPS)}")
    if "twisted.internet.reactor" in sys.modules:  # too late to choose
        return
    if name == "uvloop":
        try:
            import uvloop
        except ImportError as exc:
            raise EventLoopError("SLUICE_EVENT_LOOP=uvloop: uvloop is not installed (pip install uvloop)") from exc
        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    from twisted.internet import asyncioreactor

    asyncioreactor.install(loop)


def event_loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop under the installed reactor."""
    from twisted.internet import reactor

    loop = getattr(reactor, "_asyncioEventloop", None)
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
