"""Pipeline stages: one module each, all of the same shape.

A stage wraps the rest of the pipeline: ``wrap(call, call_next)`` for the sync driver
and ``awrap(call, call_next)`` for the async one. It may change the call, answer it
without calling on, retry, or raise a `ResilienceSignal` to fail it. The order of the
stages is written once, in `langchain_resilient_tools.pipeline.driver.STAGES`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.call import Call
from ..core.policy import ResolvedPolicy
from ..runtime.executor import TimedRunner

Next = Callable[[Call], Any]
AsyncNext = Callable[[Call], Awaitable[Any]]


@dataclass(slots=True)
class Env:
    """What stages share within one pipeline (one adapter instance)."""

    runner: TimedRunner
    """Runs sync attempts with a deadline on persistent worker threads."""
    sync_terminal: Next
    """Executes the tool once, sync (the end of the chain)."""
    resources: dict[str, Any] = field(default_factory=dict)
    backend: Any = None
    """The adapter's shared `StateBackend` (its ``store=``), or `None`: see `pipeline.shared`."""
    """Per-pipeline state owned by stages, keyed by stage name."""


class Stage:
    """Base class: a stage that only passes the call on."""

    name: ClassVar[str] = "stage"

    def __init__(self, env: Env) -> None:
        self.env = env

    def applies(self, resolved: ResolvedPolicy) -> bool:
        """Whether this stage does anything for a tool with this policy.

        The pipeline leaves a stage out of a tool's chain when it does not (decided
        once per tool), so a feature that is off costs nothing on the hot path.
        """
        return True

    def wrap(self, call: Call, call_next: Next) -> Any:
        return call_next(call)

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        """The async driver: returns an awaitable (usually a coroutine). A stage that
        only passes a call on returns ``call_next(call)`` itself, without a coroutine
        frame of its own."""
        return call_next(call)


class BeforeStage(Stage):
    """A stage that only looks at the call before passing it on: `before` may change the
    call or refuse it (by raising a signal), and the rest of the pipeline runs as usual."""

    @staticmethod
    def before(call: Call) -> None:
        """Check or change `call`; raise a `ResilienceSignal` to answer it here."""

    def wrap(self, call: Call, call_next: Next) -> Any:
        self.before(call)
        return call_next(call)

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        self.before(call)
        return await call_next(call)
