"""`ResilientTool`: any LangChain tool, or a plain function, behind the pipeline.

The wrapper keeps the tool's name, description and argument schema, so it can be bound
to a model, put in a plain `ToolNode` or given to `create_agent` like the original.
Called with a tool call it answers with a `ToolMessage` (an error envelope on failure);
called with plain arguments it returns the tool's output, or the envelope as a JSON
string.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as make_tool
from pydantic import ConfigDict, PrivateAttr

from ._adapt import has_native_async, split_args, thread_id_of
from ._call import Call
from ._envelope import envelope, failure_message, success_message
from ._errors import UsageError
from ._executor import TimedRunner
from ._pipeline import Outcome, Pipeline
from ._policy import PolicyResolver, ToolPolicy


class ResilientTool(BaseTool):
    """A `BaseTool` that runs another tool through the resilience pipeline.

    Build it with `ResilientTool.wrap(tool, policy=...)`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    """The wrapped tool."""
    policy: ToolPolicy | None = None
    """The policy of this tool (`None`: the defaults)."""

    _pipeline: Pipeline = PrivateAttr()
    _native_async: bool = PrivateAttr()

    @classmethod
    def wrap(
        cls,
        tool: BaseTool | Callable[..., Any],
        *,
        policy: ToolPolicy | None = None,
        runner: TimedRunner | None = None,
    ) -> ResilientTool:
        """Wrap a `BaseTool` or a plain function (made a tool with ``@tool`` rules)."""
        if isinstance(tool, ResilientTool):
            raise UsageError(f"{tool.name!r} is already a ResilientTool")
        if not isinstance(tool, BaseTool):
            if not callable(tool):
                raise UsageError("ResilientTool.wrap takes a BaseTool or a function")
            tool = make_tool(tool)
        wrapped = cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            return_direct=tool.return_direct,
            response_format=tool.response_format,
            metadata=tool.metadata,
            tags=tool.tags,
            inner=tool,
            policy=policy,
        )
        if runner is not None:
            wrapped._pipeline = Pipeline(PolicyResolver(policy), runner=runner)
        return wrapped

    def model_post_init(self, context: Any, /) -> None:
        self._pipeline = Pipeline(PolicyResolver(self.policy))
        self._native_async = has_native_async(self.inner)

    @property
    def pipeline(self) -> Pipeline:
        return self._pipeline

    @property
    def func(self) -> Callable[..., Any] | None:
        """The wrapped tool's function, so that LangGraph finds its injected arguments."""
        return getattr(self.inner, "func", None)

    @property
    def coroutine(self) -> Callable[..., Any] | None:
        return getattr(self.inner, "coroutine", None)

    # -- invocation ----------------------------------------------------------------

    def _new_call(self, input: Any, config: RunnableConfig | None) -> tuple[Call, bool]:
        is_tool_call = isinstance(input, dict) and input.get("type") == "tool_call"
        if is_tool_call:
            call_id, raw = str(input.get("id") or ""), input.get("args", {})
        else:
            call_id, raw = f"direct-{uuid.uuid4().hex[:12]}", input
        args = raw if isinstance(raw, dict) else {}
        visible, injected = split_args(self.inner, args)
        call = self._pipeline.new_call(
            call_id=call_id,
            name=self.name,
            args=visible,
            tool=self.inner,
            valid_tools=(self.name,),
            injected=injected,
            thread_id=thread_id_of(config),
            offload=not self._native_async,
        )
        plain = None if isinstance(raw, dict) else raw

        def tool_input(c: Call) -> Any:
            if plain is not None:
                return plain
            merged = {**c.args, **c.injected}
            if is_tool_call:
                return {**input, "args": merged}
            return merged

        call.run = lambda c: self.inner.invoke(tool_input(c), config)
        call.arun = lambda c: self.inner.ainvoke(tool_input(c), config)
        return call, is_tool_call

    def _answer(self, outcome: Outcome, is_tool_call: bool) -> Any:
        call = outcome.call
        if is_tool_call:
            if outcome.failure is not None:
                return failure_message(outcome.failure, call)
            return success_message(outcome.value, call)
        if outcome.failure is not None:
            return json.dumps(envelope(outcome.failure, call))
        value = outcome.value
        if call.record.notices:  # marked results must say so, even as plain output
            msg = success_message(value, call)
            return msg.content if isinstance(msg, ToolMessage) else value
        return value

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call, is_tool_call = self._new_call(input, config)
        return self._answer(self._pipeline.run(call), is_tool_call)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call, is_tool_call = self._new_call(input, config)
        return self._answer(await self._pipeline.arun(call), is_tool_call)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("run_manager", None)
        return self.invoke(kwargs or (args[0] if args else {}))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("run_manager", None)
        return await self.ainvoke(kwargs or (args[0] if args else {}))
