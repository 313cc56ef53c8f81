"""Heartbeats: a live call keeps its LangGraph node from being taken for idle.

A node with ``TimeoutPolicy(idle_timeout=...)`` is cancelled after that long without
progress. LangGraph sees a tool start and end (under ``refresh_on="auto"``), but nothing
while an attempt runs long or while a retry waits its backoff: a call making progress
would lose its node, and every call of the step its answer. So, while a call is alive
and bounded (it has a deadline, still ahead), it calls ``runtime.heartbeat()`` as it
starts and then every quarter of the idle timeout: on the event loop's shared alarms
(`runtime.alarms`), no thread and no timer handle of its own. A call without a deadline
(``timeout=None``, or ``Timeouts(deadline=None)``) is not vouched for: a tool that hangs
then ends as LangGraph's idle timeout says.

Only calls of a node whose attempt has an idle timeout have a pulse (`runtime.graphnode`:
``heartbeat`` is `None` otherwise), and only on the async path (LangGraph times async
nodes only); nothing is scheduled for any other call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..core.call import Call
from .alarms import alarms_for

log = logging.getLogger(__name__)


def _alive(call: Call) -> bool:
    """Whether `call` still runs within its deadline."""
    deadline = call.deadline
    return (
        call.record.outcome == "pending"
        and deadline is not None
        and call.resolved.clock() < deadline
    )


def _beat(beat: Callable[[], None]) -> None:
    try:
        beat()
    except Exception:  # LangGraph's own hook: never the call's failure
        log.warning("runtime.heartbeat() failed", exc_info=True)


def keep_alive(call: Call, beat: Callable[[], None], idle_timeout: float) -> None:
    """Beat now, and every ``idle_timeout / 4`` s while `call` is alive (see the module)."""
    loop = asyncio._get_running_loop()
    if loop is None or call.deadline is None:
        return
    _beat(beat)
    alarms = alarms_for(loop)
    period = idle_timeout / 4

    def ring() -> None:
        if not _alive(call):
            return
        _beat(beat)
        alarms.at(loop.time() + period, ring)

    alarms.at(loop.time() + period, ring)
