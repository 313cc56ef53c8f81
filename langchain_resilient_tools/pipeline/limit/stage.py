"""The limits stage: the tool's slots and limiters, and the two drivers of `core.Queue`.

Each driver takes the attempt's local slot (`runtime.slots`: first come, first served,
waiting without blocking a loop), then carries out the core's steps: a pause, or a
store operation (in place on the sync path; on a worker thread on the async one,
`pipeline.shared.off_loop`), then runs the attempt and gives back what it took.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable
from typing import Any

from langchain_core.rate_limiters import BaseRateLimiter

from ...core.call import Call
from ...core.errors import BackendError, IgnoredOptionWarning
from ...core.policy import ResolvedPolicy
from ...runtime.slots import Slots
from ...state.limits import LimitBackend, supports_limits
from ...state.pertool import PerTool
from ..shared import backend_for, off_loop
from ..stage import AsyncNext, Env, Next, Stage
from .core import Queue, Steps, make_limiter
from .shared import SharedLimit

PER_PROCESS = (
    "The limits of {tool!r} (max_concurrency, rate_limit) hold per process, not across "
    "workers: its state is shared in its store ({store}), which cannot decide them "
    "atomically across processes. Share them through a PostgresStore, Redis or a SQLite "
    'store, or say they are per process with ToolPolicy(shared=Shared(backend="local")) '
    "for it."
)


def _pause(seconds: float) -> None:
    time.sleep(seconds)  # a real pacing wait, not a backoff: testing mode keeps it


async def _apause(seconds: float) -> None:
    await asyncio.sleep(seconds)


def _drive(steps: Steps) -> None:
    """Carry out the core's steps on this thread."""
    sent: Any = None
    thrown: BackendError | None = None
    while True:
        try:
            step = steps.send(sent) if thrown is None else steps.throw(thrown)
        except StopIteration:
            return
        sent = thrown = None
        if isinstance(step, float):
            _pause(step)
            continue
        try:
            sent = step()
        except BackendError as exc:
            thrown = exc


async def _adrive(steps: Steps) -> None:
    """Carry out the core's steps without blocking the loop (store operations on a
    worker thread)."""
    sent: Any = None
    thrown: BackendError | None = None
    while True:
        try:
            step = steps.send(sent) if thrown is None else steps.throw(thrown)
        except StopIteration:
            return
        sent = thrown = None
        if isinstance(step, float):
            await _apause(step)
            continue
        try:
            sent = await off_loop(True, step)
        except BackendError as exc:
            thrown = exc


class LimitStage(Stage):
    name = "limit"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.slots: PerTool[Slots] = PerTool()
        self.limiters: PerTool[BaseRateLimiter] = PerTool()
        self.said: set[str] = set()
        """Tools whose limits stay per process on a shared store, said once each."""

    def applies(self, resolved: ResolvedPolicy) -> bool:
        policy = resolved.policy
        return policy.limits.max_concurrency is not None or policy.limits.rate_limit is not None

    def _slots(self, call: Call) -> Slots | None:
        n = call.resolved.policy.limits.max_concurrency
        return None if n is None else self.slots.get(call.name, lambda: Slots(n))

    def _limiter(self, call: Call) -> BaseRateLimiter | None:
        limits = call.resolved.policy.limits
        limit = limits.rate_limit
        if limit is None or isinstance(limit, BaseRateLimiter):
            return limit
        return self.limiters.get(call.name, lambda: make_limiter(float(limit), limits.burst))

    def _shared(self, call: Call) -> SharedLimit | None:
        """The attempt's limits in the shared store, when its state is shared in one
        that can decide them (else `None`, said once per tool for a store that cannot)."""
        backend = backend_for(self.env, call)
        if backend is None:
            return None
        if not supports_limits(backend):
            if call.name not in self.said:
                self.said.add(call.name)
                store = type(getattr(backend, "store", backend)).__name__
                warnings.warn(
                    PER_PROCESS.format(tool=call.name, store=store), IgnoredOptionWarning, 2
                )
            return None
        assert isinstance(backend, LimitBackend)
        shared = SharedLimit(backend, call)
        return shared if shared.cap is not None or shared.rate is not None else None

    def _queue(self, call: Call) -> Queue:
        return Queue(call, self._slots(call), self._limiter(call), self._shared(call))

    def wrap(self, call: Call, call_next: Next) -> Any:
        queue = self._queue(call)
        slots = queue.slots
        if slots is not None and not slots.acquire(queue.slot_wait()):
            raise queue.out_of_time()
        try:
            _drive(queue.steps())
            queue.admitted()
            return call_next(call)
        finally:
            queue.release()
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
            try:
                await _adrive(queue.steps())
                queue.admitted()
                value = await call_next(call)
            except Exception:
                await off_loop(queue.leased, queue.release)
                raise
            except BaseException:  # cancelled: the slot goes back at once, no further await
                queue.release()
                raise
            await off_loop(queue.leased, queue.release)
            return value
        finally:
            if slots is not None:
                slots.release()
