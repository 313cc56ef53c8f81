"""One attempt with a deadline: the innermost stage, which runs the tool.

Sync tools run on the pipeline's persistent worker threads and the caller waits at
most `timeout` seconds (the thread is abandoned, and counted, if the tool hangs).
Async tools are awaited as a task that is cancelled at the deadline; control returns
at once even if the tool ignores the cancellation.

The timeout of an attempt is the policy's `timeout`, or the adaptive one derived from
the tool's latency history (`runtime.adaptive`), capped to what is left of the call's
deadline (`runtime.deadline`). Tools with ``isolate=True`` run in a worker process (`runtime.isolate`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from ..core.call import Call
from ..core.errors import AttemptTimeout
from ..core.tools import has_native_async
from ..observe import otel as _otel
from ..runtime import deadline as _deadline
from ..runtime.adaptive import LatencyHistory
from ..runtime.executor import await_with_timeout, timed
from ..runtime.isolate import arun_isolated, run_isolated
from ..state.pertool import PerTool
from .stage import AsyncNext, Env, Next, Stage


def attempt_timeout(call: Call, history: LatencyHistory | None = None) -> float | None:
    """The timeout of the next attempt of `call`, in seconds (raises when none is left)."""
    configured = call.resolved.timeout
    timeout = configured if history is None else history.timeout(configured)
    return _deadline.cap(call, timeout)


def _isolated(call: Call) -> bool:
    return call.resolved.isolate and call.tool is not None


def _offloaded_by_adapter(call: Call) -> bool:
    """A sync tool the adapter's own handler runs on the pipeline's workers (its stand-in,
    `runtime.offload.OffloadedTool`, stamps the attempt's probe there)."""
    return call.tool is not None and not _isolated(call) and not has_native_async(call.tool)


def _tool_args(call: Call) -> dict[str, Any]:
    return {**call.args, **call.injected}


class AttemptStage(Stage):
    name = "attempt"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.latencies: PerTool[LatencyHistory] = PerTool()

    def history_for(self, call: Call) -> LatencyHistory | None:
        """The tool's latency history when its timeout is adaptive, else `None`."""
        spec = call.resolved.adaptive
        if spec is None:
            return None
        return self.latencies.get(call.name, lambda: LatencyHistory(spec))

    def wrap(self, call: Call, call_next: Next) -> Any:
        if call.span is not None:  # tracing: the attempt is a span of its own
            return _otel.attempt(call, partial(self._run, call, call_next))
        return self._run(call, call_next)

    def _run(self, call: Call, call_next: Next) -> Any:
        resolved = call.resolved
        if resolved.plain_attempt:
            # The common case: no latency to keep, the tool on a worker thread.
            timeout = call.attempt_timeout = _deadline.cap(call, resolved.timeout)
            call.record.attempts += 1
            if timeout is None:
                return call_next(call)
            run = self.env.runner.run
            return run(call.name, partial(call_next, call), timeout, resolved.max_abandoned_threads)
        history = self.history_for(call)
        timeout = call.attempt_timeout = attempt_timeout(call, history)
        call.record.attempts += 1
        clock = resolved.clock
        start = clock()
        if _isolated(call):
            assert call.tool is not None
            fn = partial(run_isolated, call.tool, _tool_args(call), timeout)
        else:
            fn = partial(call_next, call)
        probe = call.probe
        if probe is not None:  # an attempt of a hedge race: stamped where the tool runs
            fn = partial(probe.run, fn)
        if timeout is None or _isolated(call):
            value = fn()
        else:
            value = self.env.runner.run(call.name, fn, timeout, resolved.max_abandoned_threads)
        if history is not None:
            history.add(clock() - start)
        return value

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        if call.span is not None:
            return self._traced(call, call_next)
        return self._arun(call, call_next)

    async def _traced(self, call: Call, call_next: AsyncNext) -> Any:
        """The attempt in a span of its own (tracing on), from this stage's own frame."""
        return await _otel.aattempt(call, partial(self._arun, call, call_next))

    def _arun(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        resolved = call.resolved
        if (
            resolved.plain_attempt
            and not call.offload
            and (resolved.idempotent or not _offloaded_by_adapter(call))
        ):
            # The common case: nothing to do after the tool, so no coroutine of our own;
            # the caller's task drives the tool, one loop timer bounds it (`timed`). (A
            # write's sync tool run by the adapter's handler needs `_attempt`: its job.)
            timeout = call.attempt_timeout = _deadline.cap(call, resolved.timeout)
            call.record.attempts += 1
            return call_next(call) if timeout is None else timed(call_next(call), timeout)
        history = self.history_for(call)
        timeout = attempt_timeout(call, history)
        call.record.attempts += 1
        return self._attempt(call, call_next, history, timeout)

    async def _attempt(
        self,
        call: Call,
        call_next: AsyncNext,
        history: LatencyHistory | None,
        timeout: float | None,
    ) -> Any:
        clock = call.resolved.clock
        start = clock()
        probe = call.probe
        if call.offload and not _isolated(call):
            fn = partial(self.env.sync_terminal, call)
            if probe is not None:  # an attempt of a hedge race: stamped on its worker
                fn = partial(probe.run, fn)
            max_abandoned = call.resolved.max_abandoned_threads
            value = await self.env.runner.arun(call.name, fn, timeout, max_abandoned)
        else:
            make: Callable[[], Awaitable[Any]]
            if _isolated(call):
                assert call.tool is not None
                make = partial(arun_isolated, call.tool, _tool_args(call), timeout)
                timeout = None  # the worker process keeps it
            else:
                make = partial(call_next, call)
            if probe is not None and not _offloaded_by_adapter(call):
                make = partial(probe.arun, make)
            try:
                value = await await_with_timeout(make, timeout)
            except AttemptTimeout as exc:
                if exc.late is None and call.job is not None:
                    exc.late = call.job  # a write's sync tool runs on (`Call.job`)
                raise
            finally:
                call.job = None
        if history is not None:
            history.add(clock() - start)
        return value
