"""Client-side limits per tool: at most N attempts in flight, at most R attempts per second.

Each attempt (retries too) first takes a slot (`Limits.max_concurrency`, `runtime.slots`)
and then a token of the tool's rate limiter (`Limits.rate_limit`: langchain-core's
`InMemoryRateLimiter`, or any `BaseRateLimiter` the user shares between tools). The
wait counts against the call's deadline: a call that gets no slot or token in time is
answered ``timeout`` without running the tool. The time spent waiting is kept in the
call record (``queued_ms``).

A hedge (`Call.hedge`, `pipeline.hedge`) never waits: when no slot or token is free at
once it is not sent (``AttemptTimeout(started=False)``), since a hedge is only worth
sending into spare capacity.

One core decides (`Queue`: how long to wait for a slot, whether a token is free or how
long to pause before asking again, when the attempt is out of time); the stage's two
drivers, sync and async, only wait as it says, then run the attempt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

from langchain_core.rate_limiters import BaseRateLimiter, InMemoryRateLimiter

from ..core.call import Call
from ..core.errors import AttemptTimeout
from ..core.policy import ResolvedPolicy
from ..runtime import deadline as _deadline
from ..runtime.slots import Slots
from ..state.pertool import PerTool
from .stage import AsyncNext, Env, Next, Stage

POLL_S = 0.05
"""How often a caller looks for a token of a limiter that is not an `InMemoryRateLimiter`."""


def _pause(seconds: float) -> None:
    time.sleep(seconds)  # a real pacing wait, not a backoff: testing mode keeps it


async def _apause(seconds: float) -> None:
    await asyncio.sleep(seconds)


def make_limiter(calls_per_second: float) -> InMemoryRateLimiter:
    """The limiter behind ``rate_limit=<calls per second>``: no bursts, polled often
    enough (a tenth of the interval between calls) to hold the rate within a few %."""
    return InMemoryRateLimiter(
        requests_per_second=calls_per_second,
        check_every_n_seconds=min(0.1, 0.1 / calls_per_second),
        max_bucket_size=1,
    )


def _poll_every(limiter: BaseRateLimiter) -> float:
    step = getattr(limiter, "check_every_n_seconds", POLL_S)
    return step if isinstance(step, (int, float)) and step > 0 else POLL_S


class Queue:
    """One attempt's way to the tool through its limits: decided here, waited for by
    the drivers (`LimitStage.wrap`, `LimitStage.awrap`)."""

    __slots__ = ("call", "limiter", "slots", "started", "step")

    def __init__(self, call: Call, slots: Slots | None, limiter: BaseRateLimiter | None) -> None:
        self.call = call
        self.slots = slots
        """The tool's slots (`Limits.max_concurrency`), if it has any."""
        self.limiter = limiter
        """The tool's rate limiter (`Limits.rate_limit`), if it has one."""
        self.started = call.resolved.policy.clock()
        self.step = POLL_S if limiter is None else _poll_every(limiter)

    def slot_wait(self) -> float | None:
        """How long the attempt may wait for a slot: what is left of its deadline (`None`:
        no deadline); none for a hedge."""
        return 0.0 if self.call.hedge else _deadline.remaining_or_none(self.call)

    def out_of_time(self) -> AttemptTimeout:
        """The attempt's failure when it got no slot or token in time (never started)."""
        waited = self.call.resolved.policy.clock() - self.started
        return AttemptTimeout(round(waited, 3), started=False)

    def pause(self) -> float | None:
        """`None` when a token was taken (or there is no limiter); else how long to pause
        before asking again: a polling step, cut to what is left of the call's deadline.
        Raises `out_of_time` when none is left (a hedge does not wait at all)."""
        limiter = self.limiter
        if limiter is None or limiter.acquire(blocking=False):
            return None
        call = self.call
        if call.hedge:
            raise self.out_of_time()
        left = _deadline.remaining(call)
        if left is not None and left <= 0:
            raise self.out_of_time()
        return self.step if left is None else min(self.step, left)

    def admitted(self) -> None:
        """The attempt goes on: the time it waited is kept in its record (``queued_ms``)."""
        self.call.record.queued_ms += (self.call.resolved.policy.clock() - self.started) * 1000


class LimitStage(Stage):
    name = "limit"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.slots: PerTool[Slots] = PerTool()
        self.limiters: PerTool[BaseRateLimiter] = PerTool()

    def applies(self, resolved: ResolvedPolicy) -> bool:
        policy = resolved.policy
        return policy.limits.max_concurrency is not None or policy.limits.rate_limit is not None

    def _slots(self, call: Call) -> Slots | None:
        n = call.resolved.policy.limits.max_concurrency
        return None if n is None else self.slots.get(call.name, lambda: Slots(n))

    def _limiter(self, call: Call) -> BaseRateLimiter | None:
        limit = call.resolved.policy.limits.rate_limit
        if limit is None or isinstance(limit, BaseRateLimiter):
            return limit
        return self.limiters.get(call.name, lambda: make_limiter(float(limit)))

    def _queue(self, call: Call) -> Queue:
        return Queue(call, self._slots(call), self._limiter(call))

    def wrap(self, call: Call, call_next: Next) -> Any:
        queue = self._queue(call)
        slots = queue.slots
        if slots is not None and not slots.acquire(queue.slot_wait()):
            raise queue.out_of_time()
        try:
            while (pause := queue.pause()) is not None:
                _pause(pause)
            queue.admitted()
            return call_next(call)
        finally:
            if slots is not None:
                slots.release()

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        return self._awrap(call, call_next)

    async def _awrap(self, call: Call, call_next: AsyncNext) -> Any:
        queue = self._queue(call)
        slots = queue.slots
        if slots is not None:
            # A hedge does not queue: its look for a free slot never blocks the loop.
            wait = queue.slot_wait()
            got = slots.acquire(0.0) if wait == 0.0 else await slots.aacquire(wait)
            if not got:
                raise queue.out_of_time()
        try:
            while (pause := queue.pause()) is not None:
                await _apause(pause)
            queue.admitted()
            return await call_next(call)
        finally:
            if slots is not None:
                slots.release()
