"""Drain: once a run is asked to stop, the layer starts nothing new and finishes fast.

LangGraph's ``RunControl.request_drain()`` (a server shutting down, e.g. on SIGTERM)
sets ``runtime.drain_requested``; LangGraph stops the run at the next step boundary,
with a checkpoint to resume from. The step that is running still has to end. From
then on, the stages start no retry (`pipeline.retry`), no hedge (`pipeline.hedge`), no
half-open probe of a breaker (`pipeline.breaker`) and no run of a write
(`pipeline.drain`): each such call is answered at once with an envelope that stays true
after the resume (`Drained`: nothing was started, send it again), and attempts already
running finish. Backoff waits end as soon as the drain is asked for (`sleep`, `asleep`:
the flag is looked at every `POLL_S`; LangGraph offers no notification).

A write refused here was never started: the journal keeps no entry of it
(`pipeline.journal`), dedup does not count it as done, so the same call sent again after
the resume runs once.
"""

from __future__ import annotations

import asyncio
import time
from typing import NoReturn

from ..core import testing as _testing
from ..core.call import Call
from ..core.errors import Drained
from .graphnode import draining as _draining
from .graphnode import graph_runtime

POLL_S = 0.1
"""How often a backoff wait looks whether the run was asked to drain."""


def draining(call: Call) -> bool:
    """Whether the run `call` belongs to was asked to drain."""
    return _draining(call.config)


def refuse(call: Call, what: str, after: BaseException | None = None) -> NoReturn:
    """Answer `call` with `Drained`: `what` (a ``"write"``, ``"probe"`` or ``"retry"``)
    was not started. A call that never reached its tool is served by the drain."""
    if not call.record.attempts:
        call.record.served_by = "drain"
    raise Drained(what, after=after)


def _waits_in_slices(call: Call, seconds: float) -> bool:
    """Whether a wait of `call` must look for a drain while it waits (a real wait of a
    call in a graph run); else it is testing mode's, or a plain one."""
    return seconds > 0 and not _testing.is_testing() and graph_runtime(call.config) is not None


def sleep(call: Call, seconds: float) -> None:
    """A backoff wait of `call` (sync) that ends early when the run is asked to drain."""
    if not _waits_in_slices(call, seconds):
        _testing.sleep(seconds)
        return
    end = time.monotonic() + seconds
    while not draining(call):
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(POLL_S, left))


async def asleep(call: Call, seconds: float) -> None:
    """`sleep`, on the event loop."""
    if not _waits_in_slices(call, seconds):
        await _testing.asleep(seconds)
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not draining(call):
        left = end - loop.time()
        if left <= 0:
            return
        await asyncio.sleep(min(POLL_S, left))
