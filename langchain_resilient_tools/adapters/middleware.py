"""`ResilientToolsMiddleware`: the pipeline inside `langchain.agents.create_agent`.

Tool calls enter through the middleware's `wrap_tool_call`/`awrap_tool_call`. Calls
the model could not format (``AIMessage.invalid_tool_calls``) never reach the tool
node, so `after_model` handles them: one whose arguments can be repaired is moved into
the message's ``tool_calls`` (same id) and runs like any other; the others are answered
with ``malformed_call``, and the agent goes back to the model when no call is left to run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.types import Command, TracePolicy

from ..core.call import Call
from ..core.policy import PolicyResolver, ToolPolicy, check_policy_names
from ..core.review import asking
from ..core.tools import thread_id_of, unique_names
from ..observe.stats import StatsSnapshot
from ..observe.tracing import TraceSetting, traced_by
from ..pipeline import Outcome, Pipeline, Step
from ..runtime.deadline import deadline_of
from ..runtime.executor import TimedRunner
from ..runtime.isolate import check_isolated
from ..state.graph import ERRORS_KEY, LEDGER_KEY, append_records, merge_ledger
from ..text.envelope import failure_message, success_message, take_error_record
from .context import RERUN
from .dangling import arepair_dangling, repair_dangling, repair_option
from .invalid_calls import answer_invalid_calls
from .layers import Layers
from .review import areview_each, arun_durably, require_checkpointer, review_each, run_durably
from .rollback import rollback_before_model
from .turns import TurnSteps
from .wiring import arun_with, run_with


class ResilientAgentState(AgentState[Any]):
    """The agent state plus ``tool_errors``, the appended error records."""

    tool_errors: NotRequired[Annotated[list[dict[str, Any]], append_records]]
    tool_ledger: NotRequired[Annotated[dict[str, Any], merge_ledger]]


class ResilientToolsMiddleware(AgentMiddleware[ResilientAgentState, Any, Any]):
    """Runs every tool call of a `create_agent` agent through the resilience pipeline.

    Args:
        policy: The default `ToolPolicy` of every tool.
        policies: ``{tool_name: ToolPolicy}``, overriding fields of `policy` per tool.
        patterns: ``{fnmatch_pattern: ToolPolicy}``, defaults by tool name (e.g.
            ``"search_*"``) between `policy` and `policies`; see `PolicyResolver`.
        store: A LangGraph ``BaseStore`` (e.g. ``PostgresStore``) or a ``redis.Redis``
            client in which breakers, dedup ledger and caches are shared by every
            worker; `None` keeps them in-process (see `Shared.backend`).
        trace_policy: What traces record of this middleware's hook spans: ``"full"``,
            ``"redact"``, ``"omit"`` or a LangGraph ``TracePolicy`` (`observe.tracing`);
            `None`: LangChain's default.
        repair_dangling: Answer calls a stopped run left unanswered (`adapters.dangling`).
    """

    state_schema = ResilientAgentState

    def __init__(
        self,
        *,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
        runner: TimedRunner | None = None,
        store: Any = None,
        trace_policy: TraceSetting | TracePolicy | None = None,
        repair_dangling: bool = True,
    ) -> None:
        super().__init__()
        self.repair_dangling = repair_option(repair_dangling)
        self.pipeline = Pipeline(
            PolicyResolver(policy, policies, patterns), runner=runner, store=store
        )  # store: shared breaker/dedup/caches across workers (`state.backend`)
        self._agent_tools: dict[str, BaseTool] = {}
        self._names_checked = False
        self._steps = TurnSteps(self.pipeline)
        """The step of each turn: its identical calls are one (the first runs first)."""
        self._layers = Layers(self.pipeline.resolver, "middleware")  # a retry inside ours
        self.trace_policy = traced_by(trace_policy, self.pipeline.observer)  # for create_agent

    def _asks_person(self, request: ToolCallRequest) -> bool:
        """Whether an unknown outcome of the requested tool is a question for a person."""
        return asking(self.pipeline.resolver.resolve(request.tool_call["name"], request.tool))

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls made through this middleware (a snapshot)."""
        return self.pipeline.stats()

    def _remember_tools(self, request: ModelRequest[Any]) -> None:
        # The agent's tools are only visible on model requests; invalid calls need them.
        if len(self._agent_tools) != len(request.tools):
            # Two of one name (added by a middleware; create_agent drops them): refused.
            unique_names(request.tools, type(self).__name__)
            tools = {t.name: t for t in request.tools if isinstance(t, BaseTool)}
            # The middleware first sees the agent's tools here: isolate=True on a tool
            # that cannot be pickled raises before the first tool call.
            check_isolated(self.pipeline.resolver, tools.values())
            self._agent_tools = tools

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

    def _new_call(self, request: ToolCallRequest, step: Step, *, rerun: bool = False) -> Call:
        tc = request.tool_call
        runtime = request.runtime
        tools = getattr(runtime, "tools", None) or []
        if not self._names_checked and tools:
            # Every tool of the agent is known here (a model request may see fewer).
            check_policy_names(self.pipeline.resolver, [t.name for t in tools])
            self.pipeline.learn_tools({t.name: t for t in tools if hasattr(t, "name")})
            self._names_checked = True
        call = self.pipeline.new_call(
            of_step=step,
            call_id=tc["id"] or "",
            name=tc["name"],
            args=dict(tc["args"]),
            tool=request.tool,
            valid_tools=[t.name for t in tools if hasattr(t, "name")],
            thread_id=thread_id_of(getattr(runtime, "config", None)),
            deadline=deadline_of(getattr(runtime, "config", None)),
            state=request.state,
            config=getattr(runtime, "config", None),
            context=getattr(runtime, "context", None),
            store=getattr(runtime, "store", None),
            rerun=rerun,
        )
        return call

    @staticmethod
    def _answer(outcome: Outcome, step: Step) -> ToolMessage | Command[Any]:
        # The step's update rides in a `Command`; a rollback wish stays for `before_model`.
        if outcome.failure is None:
            # A list of Commands/ToolMessages (a form ToolNode supports) passes as it is.
            answer: Any = step.answer(outcome, success_message(outcome.value, outcome.call))
            thread = step.close([answer], keep=True).thread
            if not thread:
                return cast("ToolMessage | Command[Any]", answer)
            return Command(update={"messages": [answer], LEDGER_KEY: thread})
        message = step.answer(outcome, failure_message(outcome.failure, outcome.call))
        update: dict[str, Any] = {"messages": [message], ERRORS_KEY: [take_error_record(message)]}
        thread = step.close([message], keep=True).thread
        if thread:
            update[LEDGER_KEY] = thread
        return Command(update=update)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        self._layers.guard(request, handler, self)

        def answer() -> Any:
            step = self._steps(request.state)  # its turn's (invariant 8)
            call = self._new_call(request, step, rerun=RERUN.get())
            call.run = run_with(handler, request)
            return self._answer(self.pipeline.run(call), step)

        if not self._asks_person(request):
            return cast("ToolMessage | Command[Any]", answer())
        require_checkpointer(_config_of(request), type(self).__name__)
        asked = review_each(self.pipeline.loose_step, [run_durably(answer)], _same(answer))
        return cast("ToolMessage | Command[Any]", asked[0])

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        runner = self.pipeline.env.runner
        self._layers.guard(request, handler, self)

        async def answer() -> Any:
            step = self._steps(request.state)  # its turn's (invariant 8)
            call = self._new_call(request, step, rerun=RERUN.get())
            call.arun = arun_with(handler, request, runner)
            return self._answer(await self.pipeline.arun(call), step)

        if not self._asks_person(request):
            return cast("ToolMessage | Command[Any]", await answer())
        require_checkpointer(_config_of(request), type(self).__name__)
        first = await arun_durably(answer)
        asked = await areview_each(self.pipeline.loose_step, [first], _same(answer))
        return cast("ToolMessage | Command[Any]", asked[0])

    @hook_config(can_jump_to=["model"])
    def after_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Answer, or repair and run, the calls the model could not format."""
        return answer_invalid_calls(self.pipeline, self._agent_tools, state)

    async def aafter_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    def before_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Answer calls a stopped run left unanswered (`adapters.dangling`), else roll back
        the last tool turn when a result asked for it (see `adapters.rollback`)."""
        repaired = repair_dangling(self, state)
        return repaired if repaired is not None else rollback_before_model(self.pipeline, state)

    async def abefore_model(
        self, state: ResilientAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await arepair_dangling(self, state, runtime)  # off the event loop if needed


def _config_of(request: ToolCallRequest) -> Any:
    return getattr(request.runtime, "config", None)


def _same(job: Any) -> Callable[[int], Any]:
    return lambda _i: job
