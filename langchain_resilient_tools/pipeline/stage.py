"""Pipeline stages: one module each, all of the same shape.

A stage wraps the rest of the pipeline: ``wrap(call, call_next)`` for the sync driver
and ``awrap(call, call_next)`` for the async one. It may change the call, answer it
without calling on, retry, or raise a `ResilienceSignal` to fail it. The order of the
stages is written once, in `langchain_resilient_tools.pipeline.driver.STAGES`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from langchain_core.messages import ToolMessage

from ..core.call import Call
from ..core.policy import ResolvedPolicy
from ..runtime.executor import TimedRunner
from ..state.pertool import PerTool
from ..state.results import ResultStore
from .step import Outcome, Step, StepUpdate

Next = Callable[[Call], Any]
AsyncNext = Callable[[Call], Awaitable[Any]]


class Budget(Protocol):
    """A budget of extra attempts (`Env.retry_budget`): one is taken, or refused."""

    def try_spend(self) -> bool: ...


def _closed(tool: str) -> bool:
    return True


def _no_budget(call: Call) -> Budget | None:
    return None


def _unheard(call: Call, content: Any) -> None:
    return None


@dataclass(slots=True)
class Env:
    """What stages share within one pipeline (one adapter instance).

    Stages never import one another: what one publishes for the others is a typed field
    here (per pipeline) or of `core.call.Call` (per call), each saying who writes it
    and who reads it. A field a stage publishes has a default for a pipeline without
    that stage."""

    runner: TimedRunner
    """Runs sync attempts with a deadline on persistent worker threads."""
    sync_terminal: Next
    """Executes the tool once, sync (the end of the chain)."""
    resolve: Callable[..., ResolvedPolicy] | None = None
    """The pipeline's policy of a tool outside a call (``resolve(name, tool)``), for a
    stage's step hooks (`Stage.open_step`)."""
    backend: Any = None
    """The adapter's shared `StateBackend` (its ``store=``), or `None`: see `pipeline.shared`."""
    backends: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """`pipeline.shared.backend_for`'s: the shared backend of each graph store met, by
    the store's id (kept with it, so the id stays unique)."""
    results: PerTool[ResultStore] = field(default_factory=PerTool)
    """Written by the cache stage, read by the fallback stage (stale results): the
    tools' in-process result stores (`pipeline.shared.store_for`)."""
    circuit_closed: Callable[[str], bool] = _closed
    """Published by the breaker stage: whether a tool's circuit, in this process, is
    closed (or it has no breaker). Asked by hedge: a hedge goes to a closed circuit only."""
    retry_budget: Callable[[Call], Budget | None] = _no_budget
    """Published by the retry stage: the retry budget of the call's tool (`None`: the
    tool is not retried, or has no budget). Asked by hedge: a hedge spends from it too."""
    known_write: Callable[[Call, Any], None] = _unheard
    """Published by the dedup stage: record a write that a stage outside dedup answered
    without running it, with its result as message content (`None`: its outcome is
    unknown), so that its repeats are decided as if it had run here. Told by the journal
    when it answers a resumed step's write (from its receipt, or as orphaned)."""


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

    def open_step(self, step: Step) -> None:
        """Take part in a step before its calls are made (optional; see `pipeline.step`).

        Only a stage that overrides it is asked, once per step, whatever its tools."""

    def mark_answer(self, outcome: Outcome, message: ToolMessage) -> Mapping[str, Any] | None:
        """What a call's answer carries to the end of its step (optional; metadata keys
        of the stage's own, see `pipeline.step`)."""
        return None

    def review_step(self, step: Step, messages: Sequence[ToolMessage], update: StepUpdate) -> None:
        """Read the questions for a person off the step's answers into `update`
        (optional; `Step.review`): nothing is taken off them."""

    def close_step(
        self, step: Step, messages: Sequence[ToolMessage], update: StepUpdate, keep: bool
    ) -> None:
        """Read the stage's marks off the step's answers into `update` (optional); take
        them off unless `keep`."""

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
