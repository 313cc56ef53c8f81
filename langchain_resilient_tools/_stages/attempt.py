"""One attempt with a deadline: the innermost stage, which runs the tool.

Sync tools run on the pipeline's persistent worker threads and the caller waits at
most `timeout` seconds (the thread is abandoned, and counted, if the tool hangs).
Async tools are awaited as a task that is cancelled at the deadline; control returns
at once even if the tool ignores the cancellation.
"""

from __future__ import annotations

from typing import Any

from .._call import Call
from .._executor import await_with_timeout
from . import AsyncNext, Next, Stage


def attempt_timeout(call: Call) -> float | None:
    """The timeout of the next attempt of `call`, in seconds."""
    return call.resolved.policy.timeout


class AttemptStage(Stage):
    name = "attempt"

    def wrap(self, call: Call, call_next: Next) -> Any:
        call.record.attempts += 1
        timeout = attempt_timeout(call)
        if timeout is None:
            return call_next(call)
        policy = call.resolved.policy
        return self.env.runner.run(
            call.name, lambda: call_next(call), timeout, policy.max_abandoned_threads
        )

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        call.record.attempts += 1
        timeout = attempt_timeout(call)
        if call.offload:
            terminal = self.env.sync_terminal
            policy = call.resolved.policy
            return await self.env.runner.arun(
                call.name, lambda: terminal(call), timeout, policy.max_abandoned_threads
            )
        return await await_with_timeout(lambda: call_next(call), timeout)
