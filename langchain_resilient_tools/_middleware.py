"""`ResilientToolsMiddleware`: the pipeline inside `langchain.agents.create_agent`.

Tool calls enter through the middleware's `wrap_tool_call`/`awrap_tool_call`. Calls
the model could not format (``AIMessage.invalid_tool_calls``) never reach the tool
node, so `after_model` answers them, and sends the agent back to the model when no
valid call is left to run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from ._adapt import thread_id_of
from ._call import Call
from ._envelope import failure_message, success_message
from ._executor import TimedRunner
from ._pipeline import Outcome, Pipeline
from ._policy import PolicyResolver, ToolPolicy
from ._state import ERRORS_KEY, append_records


class ResilientAgentState(AgentState[Any]):
    """The agent state plus ``tool_errors``, the appended error records."""

    tool_errors: NotRequired[Annotated[list[dict[str, Any]], append_records]]


def _never_runs(call: Call) -> Any:
    raise AssertionError("a malformed call is answered before it could run")


class ResilientToolsMiddleware(AgentMiddleware[ResilientAgentState, Any, Any]):
    """Runs every tool call of a `create_agent` agent through the resilience pipeline.

    Args:
        policy: The default `ToolPolicy` of every tool.
        policies: ``{tool_name: ToolPolicy}``, overriding fields of `policy` per tool.
    """

    state_schema = ResilientAgentState

    def __init__(
        self,
        *,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        runner: TimedRunner | None = None,
    ) -> None:
        super().__init__()
        self.pipeline = Pipeline(PolicyResolver(policy, policies), runner=runner)
        self._agent_tools: dict[str, BaseTool] = {}

    def _remember_tools(self, request: ModelRequest[Any]) -> None:
        # The agent's tools are only visible on model requests; invalid calls need them.
        if len(self._agent_tools) != len(request.tools):
            self._agent_tools = {t.name: t for t in request.tools if isinstance(t, BaseTool)}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        self._remember_tools(request)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        self._remember_tools(request)
        return await handler(request)

    def _new_call(self, request: ToolCallRequest) -> Call:
        tc = request.tool_call
        runtime = request.runtime
        tools = getattr(runtime, "tools", None) or []
        return self.pipeline.new_call(
            call_id=tc["id"] or "",
            name=tc["name"],
            args=dict(tc["args"]),
            tool=request.tool,
            valid_tools=[t.name for t in tools if hasattr(t, "name")],
            thread_id=thread_id_of(getattr(runtime, "config", None)),
            state=request.state,
        )

    @staticmethod
    def _answer(outcome: Outcome) -> ToolMessage | Command[Any]:
        if outcome.failure is None:
            return success_message(outcome.value, outcome.call)
        message = failure_message(outcome.failure, outcome.call)
        return Command(
            update={"messages": [message], ERRORS_KEY: [message.response_metadata["tool_error"]]}
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = self._new_call(request)
        call.run = lambda c: handler(
            request.override(tool_call={**request.tool_call, "args": c.args})
        )
        return self._answer(self.pipeline.run(call))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = self._new_call(request)
        call.arun = lambda c: handler(
            request.override(tool_call={**request.tool_call, "args": c.args})
        )
        return self._answer(await self.pipeline.arun(call))

    @hook_config(can_jump_to=["model"])
    def after_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        messages = state["messages"]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or not last.invalid_tool_calls:
            return None
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        names = list(self._agent_tools)
        replies: list[ToolMessage] = []
        for bad in last.invalid_tool_calls:
            if not bad.get("id") or bad["id"] in answered:
                continue
            call = self.pipeline.new_call(
                call_id=bad["id"] or "",
                name=bad.get("name") or "",
                args={},
                tool=self._agent_tools.get(bad.get("name") or ""),
                valid_tools=names,
                raw_args=bad.get("args"),
                parse_error=bad.get("error") or "the arguments are not valid JSON",
                passthrough_unknown=True,
            )
            call.run = _never_runs
            outcome = self.pipeline.run(call)
            assert outcome.failure is not None
            replies.append(failure_message(outcome.failure, outcome.call))
        if not replies:
            return None
        update: dict[str, Any] = {
            "messages": replies,
            ERRORS_KEY: [r.response_metadata["tool_error"] for r in replies],
        }
        if not last.tool_calls:
            update["jump_to"] = "model"
        return update

    async def aafter_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.after_model(state, runtime)
