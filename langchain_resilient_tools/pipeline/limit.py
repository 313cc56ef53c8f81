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


def _out_of_time(call: Call, started: float) -> AttemptTimeout:
    return AttemptTimeout(round(call.resolved.policy.clock() - started, 3), started=False)


def _wait_for_slot(call: Call) -> float | None:
    """How long `call` may wait for a slot: what is left of its deadline; none for a hedge."""
    return 0.0 if call.hedge else _deadline.remaining_or_none(call)


def _next_pause(call: Call, step: float, started: float) -> float:
    """How long to wait before asking the rate limiter again: a polling step, cut to
    what is left of the call's deadline (none left: the call is out of time; a hedge
    does not wait at all)."""
    if call.hedge:
        raise _out_of_time(call, started)
    left = _deadline.remaining(call)
    if left is not None and left <= 0:
        raise _out_of_time(call, started)
    return step if left is None else min(step, left)


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

    def wrap(self, call: Call, call_next: Next) -> Any:
        clock = call.resolved.policy.clock
        started = clock()
        slots = self._slots(call)
        if slots is not None and not slots.acquire(_wait_for_slot(call)):
            raise _out_of_time(call, started)
        try:
            limiter = self._limiter(call)
            if limiter is not None:
                step = _poll_every(limiter)
                while not limiter.acquire(blocking=False):
                    _pause(_next_pause(call, step, started))
            call.record.queued_ms += (clock() - started) * 1000
            return call_next(call)
        finally:
            if slots is not None:
                slots.release()

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        return self._awrap(call, call_next)

    async def _awrap(self, call: Call, call_next: AsyncNext) -> Any:
        clock = call.resolved.policy.clock
        started = clock()
        slots = self._slots(call)
        if slots is not None:
            # A hedge does not queue: its look for a free slot never blocks the loop.
            wait = _wait_for_slot(call)
            got = slots.acquire(0.0) if wait == 0.0 else await slots.aacquire(wait)
            if not got:
                raise _out_of_time(call, started)
        try:
            limiter = self._limiter(call)
            if limiter is not None:
                step = _poll_every(limiter)
                while not limiter.acquire(blocking=False):
                    await _apause(_next_pause(call, step, started))
            call.record.queued_ms += (clock() - started) * 1000
            return await call_next(call)
        finally:
            if slots is not None:
                slots.release()
