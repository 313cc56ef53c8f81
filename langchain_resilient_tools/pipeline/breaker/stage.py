"""The circuit breaker stage: each attempt asks the tool's breaker first.

It sits inside the retry stage, so every attempt is counted and an open circuit stops
the retries at once (`CircuitOpen` is final for the retry stage). What counts as a
failure: service failures (`pipeline.health.is_service_failure`: timeouts, busy, transient
errors), successful attempts slower than `slow_call_s`, and flagged results when
`count_low_quality`. An error the service answered with (a bad argument) counts as a
success: the service is alive. Control flow and cancellation do not count at all.

Once the run is asked to drain (`runtime.drain`), a call that would be the half-open
probe is not started (`Drained`): the ticket goes back without a verdict, so the
circuit stays half-open and the next call, after the resume, probes.
"""

from __future__ import annotations

from typing import Any

from ...core.call import Call
from ...core.errors import LowQualityResult, ToolRaised
from ...core.policy import ResolvedPolicy
from ...runtime import drain as _drain
from ...state.pertool import PerTool
from ..health import is_service_failure
from ..shared import backend_for, off_loop
from ..stage import AsyncNext, Env, Next, Stage
from .machine import CLOSED, CircuitBreaker
from .shared import SharedBreaker


def failed(call: Call, exc: BaseException) -> bool | None:
    """The breaker's verdict on an attempt that raised `exc` (`None`: not counted)."""
    if not isinstance(exc, Exception):
        return None  # cancellation, interpreter exit
    breaker = call.resolved.policy.breaker
    if isinstance(exc, LowQualityResult):
        return bool(breaker and breaker.count_low_quality)
    if is_service_failure(exc, call):
        return True
    if isinstance(exc, ToolRaised):
        return False  # the service answered: the call was wrong, not the service
    return None  # control flow, or a verdict about the call made before the tool ran


def _slow(call: Call, seconds: float) -> bool:
    breaker = call.resolved.policy.breaker
    return bool(breaker and breaker.slow_call_s is not None and seconds >= breaker.slow_call_s)


class BreakerStage(Stage):
    name = "breaker"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return resolved.policy.breaker is not None

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.breakers: PerTool[CircuitBreaker] = PerTool()
        env.circuit_closed = self.circuit_closed  # published (hedge asks it)

    def circuit_closed(self, tool: str) -> bool:
        """Whether `tool` has no breaker, or one whose circuit (in this process) is
        closed: a hedge is not sent to a tool whose circuit is open or half-open."""
        breaker = self.breakers.peek(tool)
        return breaker is None or breaker.state == CLOSED

    def breaker_for(self, call: Call) -> CircuitBreaker | SharedBreaker | None:
        """The tool's breaker (made on first use), or `None` when it has none."""
        policy = call.resolved.policy
        spec = policy.breaker
        if spec is None:
            return None
        local = self.breakers.get(call.name, lambda: CircuitBreaker(call.name, spec, policy.clock))
        backend = backend_for(self.env, call)
        return local if backend is None else SharedBreaker(local, backend, call)

    def wrap(self, call: Call, call_next: Next) -> Any:
        breaker = self.breaker_for(call)
        if breaker is None:
            return call_next(call)
        try:
            ticket = breaker.acquire()
            if ticket.probe and _drain.draining(call):  # no probe while the run stops
                breaker.release(ticket, None)
                _drain.refuse(call, "probe")
            start = breaker.clock()
            try:
                value = call_next(call)
            except BaseException as exc:
                breaker.release(ticket, failed(call, exc))
                raise
            breaker.release(ticket, _slow(call, breaker.clock() - start))
        finally:
            call.record.breaker = breaker.state  # published: the call's event carries it
        return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        breaker = self.breaker_for(call)
        if breaker is None:
            return await call_next(call)
        shared = isinstance(breaker, SharedBreaker)  # its state is in a store: off the loop
        try:
            ticket = await off_loop(shared, breaker.acquire)
            if ticket.probe and _drain.draining(call):  # no probe while the run stops
                await off_loop(shared, breaker.release, ticket, None)
                _drain.refuse(call, "probe")
            start = breaker.clock()
            try:
                value = await call_next(call)
            except Exception as exc:
                await off_loop(shared, breaker.release, ticket, failed(call, exc))
                raise
            except BaseException as exc:  # cancelled: recorded at once, no further await
                breaker.release(ticket, failed(call, exc))
                raise
            await off_loop(shared, breaker.release, ticket, _slow(call, breaker.clock() - start))
        finally:
            call.record.breaker = breaker.state  # published: the call's event carries it
        return value
