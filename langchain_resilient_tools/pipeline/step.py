"""The step: all the tool calls of one model message, as the pipeline runs them.

An adapter that sees a message's calls opens a step (`Pipeline.open_step`), makes each
call of it with `Step.call` (not `Pipeline.new_call`), runs the calls as its framework
runs them, in the order `Step.order` asks for, and renders the outcomes. A stage may take
part in the step with two optional hooks (`pipeline.stage.Stage`):

- ``open_step(step)``: once, before any call is made: look at the step's calls, state and
  config, mark each call the step makes (`Step.on_call`), and say which call waits for
  which (`Step.order`). Dedup does: identical calls are one logical call, the first runs
  first and its twins share its outcome (`pipeline.dedup.twins`).

The step is the pipeline's, never a stage's: what a stage learns of it stays in what it
registers here, so adapters translate their framework's shapes and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.call import Call

OnCall = Callable[[Call], None]
"""A stage's mark on each call a step makes (registered in its ``open_step``)."""


@dataclass(slots=True, eq=False)
class Step:
    """The calls of one model message, made and run together (see the module)."""

    tool_calls: Sequence[Mapping[str, Any]]
    """The message's tool calls, in its order, as the adapter parsed them."""
    new_call: Callable[..., Call]
    """How a call is made (`Pipeline.new_call`), before the stages mark it."""
    id: str | None = None
    """The step's identity when the adapter has one (a model message's), else `None`: a
    stage that needs one makes its own (one run of a node's step)."""
    state: Any = None
    """The graph state the step runs in, when there is one."""
    config: Any = None
    """The run's config (`RunnableConfig`), when there is one."""
    order: tuple[int | None, ...] = ()
    """For each call, the index of an earlier call it waits for (set by ``open_step``
    hooks; default: none waits)."""
    marks: list[OnCall] = field(default_factory=list)
    """What the stages mark each call with (`on_call`), in the stages' order."""

    def __post_init__(self) -> None:
        if len(self.order) != len(self.tool_calls):
            self.order = (None,) * len(self.tool_calls)

    def on_call(self, mark: OnCall) -> None:
        """Mark every call this step makes with `mark` (for a stage's ``open_step``)."""
        self.marks.append(mark)

    def call(self, **fields: Any) -> Call:
        """One call of this step: `Pipeline.new_call` with `fields`, marked by the
        stages that take part in the step."""
        call = self.new_call(**fields)
        for mark in self.marks:
            mark(call)
        return call
