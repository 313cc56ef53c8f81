"""`ResilientToolNode` steps in which a write may ask a person (see `adapters.review`).

Such a step runs every call as a LangGraph task, started from the node's thread in the
order of the calls (the first of identical calls first), so that a resume, which runs
the node again, finds each finished call's answer instead of running it again. Then
each question is asked, in the order of the calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.tool_node import ToolRuntime

from . import review
from .context import INPUT_TYPE
from .node_io import MessageForms

InputType = Literal["list", "dict", "tool_calls"]


class ReviewedSteps(MessageForms):
    """The reviewed step drivers of `ResilientToolNode` (a base; not used alone)."""

    _asking: frozenset[str]
    """The node's tools whose unknown outcomes are questions for a person."""

    def _reviewed_step(self, tool_calls: Sequence[ToolCall]) -> bool:
        return bool(self._asking) and any(tc["name"] in self._asking for tc in tool_calls)

    def _reviewed(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        twins: list[int | None],
        input_type: InputType,
        config: RunnableConfig,
    ) -> list[Any]:
        review.require_checkpointer(config, f"ResilientToolNode {self.name!r}")

        def job(i: int) -> Callable[[], Any]:
            def run() -> Any:
                return self._run_one(tool_calls[i], input_type, runtimes[i])

            return run

        futures: list[Any] = []
        for i in range(len(tool_calls)):
            if (j := twins[i]) is not None:  # identical calls: the first one runs first
                futures[j].result()
            futures.append(review.start(job(i)))
        answers = [future.result() for future in futures]
        return review.review_each(answers, job)

    async def _areviewed(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        twins: list[int | None],
        input_type: InputType,
        config: RunnableConfig,
    ) -> list[Any]:
        review.require_checkpointer(config, f"ResilientToolNode {self.name!r}")

        def job(i: int) -> Callable[[], Awaitable[Any]]:
            async def run() -> Any:
                INPUT_TYPE.set(input_type)  # in the task's own context
                return await self._arun_one(tool_calls[i], input_type, runtimes[i])

            return run

        futures: list[Any] = []
        for i in range(len(tool_calls)):
            if (j := twins[i]) is not None:
                await futures[j]
            futures.append(review.astart(job(i)))
        answers = [await future for future in futures]
        return await review.areview_each(answers, job)
