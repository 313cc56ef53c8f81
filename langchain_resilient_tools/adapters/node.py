"""`ResilientToolNode`: LangGraph's `ToolNode` with the pipeline plugged in.

The pipeline enters through ToolNode's own `wrap_tool_call`/`awrap_tool_call` hooks, so
everything ToolNode does (input forms, injection, `Command`/`Send`, interrupts) is
untouched; a user's own wrapper runs inside the pipeline, between the stages and the
tool. The node opens the pipeline's `Step` of each step it runs, and is made of parts:
`adapters.node_io` (the message forms, malformed calls too; ``handle_tool_errors``),
`adapters.node_calls` (each call's way through the pipeline), `adapters.node_step`
(the step drivers), `adapters.records` and `adapters.rollback` (what a step's end
writes to the graph state: ``tool_errors``, ``tool_ledger``, a rollback).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.messages import AnyMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import Runtime
from pydantic import BaseModel

from ..core.errors import for_author
from ..core.policy import PolicyResolver, ToolPolicy, check_policy_names
from ..core.review import asking
from ..core.tools import expect_tools, thread_id_of
from ..observe.stats import StatsSnapshot
from ..pipeline import Pipeline, Step
from ..runtime.executor import TimedRunner
from ..runtime.isolate import check_isolated
from ..runtime.steploop import run_step, step_loop
from ..state.graph import ERRORS_KEY, LEDGER_KEY, DroppedRecordsWarning
from .context import INPUT_TYPE
from .layers import Layers
from .node_calls import AsyncToolCallWrapper, NodeCalls, ToolCallWrapper
from .node_io import ErrorAnswers, HandleToolErrors, InputType, runtimes, with_invalid_calls
from .node_step import arun_all, arun_reviewed, run_reviewed, run_threaded
from .records import with_error_records
from .rollback import finish_node_step


class ResilientToolNode(ToolNode):
    """A drop-in `ToolNode` whose every call runs through the resilience pipeline.

    Args:
        tools: As for `ToolNode`.
        policy: The default `ToolPolicy` of every tool.
        policies: ``{tool_name: ToolPolicy}``, overriding fields of `policy` per tool.
        patterns: ``{fnmatch_pattern: ToolPolicy}``, defaults by tool name (e.g.
            ``"search_*"``) between `policy` and `policies`; see `PolicyResolver`.
        store: A LangGraph ``BaseStore`` (e.g. ``PostgresStore``) or a ``redis.Redis``
            client in which breakers, dedup ledger and caches are shared by every
            worker; `None` keeps them in-process (see `Shared.backend`).
        handle_tool_errors: As in `ToolNode`, for an exception that came from a tool or
            from its own argument validation: `None` (default) and `True` answer with
            the error envelope; `False` re-raises it (`ToolInvocationError` for bad
            arguments); a `str` is the content; an exception type or tuple answers those
            types and re-raises others; a callable builds the content for the types it
            annotates. Any setting but `None`/`True` leaves argument validation to the
            tool. A wiring bug of a tool's return (an invalid `Command`, a list without
            its terminating `ToolMessage`) raises with `None` and `False`, as ToolNode's
            default does, and is answered like a tool's error by any setting that
            catches it (`True`, a `str`, ``ValueError``). Failures the pipeline finds
            itself (timeouts, an open circuit, duplicates, unknown tools) are always
            answered with the envelope (see `adapters.node_io`).
        errors_key: State key for error records, written when the state has that key.
        name: As in `ToolNode`, and so are `tags`, `messages_key`, `wrap_tool_call`
            and `awrap_tool_call`: they keep their meaning.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: HandleToolErrors | None = None,
        messages_key: str = "messages",
        wrap_tool_call: ToolCallWrapper | None = None,
        awrap_tool_call: AsyncToolCallWrapper | None = None,
        errors_key: str | None = ERRORS_KEY,
        runner: TimedRunner | None = None,
        store: Any = None,
    ) -> None:
        tools = expect_tools(tools, "ResilientToolNode")  # no two of one name
        self._errors = ErrorAnswers(handle_tool_errors)
        self._errors_key = errors_key
        self._rollbacks: dict[str, int] = {}  # per thread, when the state has no ledger
        self._errors_dropped = DroppedRecordsWarning()  # said once, when state has no key
        pipeline = Pipeline(
            PolicyResolver(policy, policies, patterns), runner=runner, store=store
        )  # store: shared breaker/dedup/caches across workers (`state.backend`)
        layers = Layers(pipeline.resolver, "node")  # a retry in a user's wrapper
        # A sync-only user wrapper keeps ToolNode's meaning on the async path (it is
        # called with a sync executor), so the pipeline then enters through ours too.
        use_async = awrap_tool_call is not None or wrap_tool_call is None
        calls = NodeCalls(
            pipeline,
            self._errors,
            layers,
            self._execute_tool_sync,
            node=name or "tools",
            user_wrap=wrap_tool_call,
            user_awrap=awrap_tool_call,
        )
        super().__init__(
            tools,
            name=name,
            tags=tags,
            handle_tool_errors=False,
            messages_key=messages_key,
            wrap_tool_call=calls.wrap,
            awrap_tool_call=calls.awrap if use_async else None,
        )
        self.pipeline = pipeline
        self._calls = calls
        calls.use_tools(self.tools_by_name)
        self._tool_list = list(self.tools_by_name.values())
        check_policy_names(pipeline.resolver, calls.names)
        pipeline.check_ignored(self.tools_by_name)  # a retry on a write: said; reads learnt
        check_isolated(pipeline.resolver, self._tool_list)  # isolate=True needs pickling
        resolve = pipeline.resolver.resolve
        self._asking = frozenset(n for n, t in self.tools_by_name.items() if asking(resolve(n, t)))
        """The node's tools whose unknown outcomes are questions for a person."""
        layers.find(wrap_tool_call, awrap_tool_call)
        layers.check(calls.names, self.tools_by_name)  # a write it covers: refused

    def __repr__(self) -> str:  # not ToolNode's, which prints our hooks: recursion
        return f"{type(self).__name__}(name={self.name!r}, tools={list(self.tools_by_name)!r})"

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls made through this node (a snapshot)."""
        return self.pipeline.stats()

    # -- in, and the wiring bugs ToolNode raises for the graph's author --------------

    def _parse_input(
        self, input: list[AnyMessage] | dict[str, Any] | BaseModel
    ) -> tuple[list[ToolCall], InputType]:
        calls, input_type = super()._parse_input(input)
        return with_invalid_calls(calls, input_type, input, self._messages_key), input_type

    def _inject_tool_args(
        self, tool_call: ToolCall, tool_runtime: ToolRuntime, tool: BaseTool | None = None
    ) -> ToolCall:
        try:
            return super()._inject_tool_args(tool_call, tool_runtime, tool)
        except Exception as exc:  # e.g. InjectedStore without a store: the author's to fix
            raise for_author(exc) from None

    def _normalize_tool_response(
        self, response: Any, tool_call: ToolCall, input_type: InputType
    ) -> Any:
        try:
            return super()._normalize_tool_response(response, tool_call, input_type)
        except (ValueError, TypeError) as exc:  # an invalid Command or return type
            if self._errors.catches(exc):  # the author asked: the tool's error, as in ToolNode
                raise
            raise for_author(exc) from None

    # -- the step ------------------------------------------------------------------

    def _open(
        self, input: Any, config: RunnableConfig, runtime: Runtime[Any]
    ) -> tuple[list[ToolCall], InputType, list[ToolRuntime]]:
        tool_calls, input_type = self._parse_input(input)
        state_of = partial(self._extract_state, input)
        return (
            tool_calls,
            input_type,
            runtimes(tool_calls, config, runtime, state_of, self._tool_list),
        )

    @property
    def _where(self) -> str:
        return f"ResilientToolNode {self.name!r}"

    def _reviewed(self, tool_calls: Sequence[ToolCall]) -> bool:
        """Whether a write of the step may ask a person (`adapters.review`)."""
        return bool(self._asking) and any(tc["name"] in self._asking for tc in tool_calls)

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type, rts = self._open(input, config, runtime)
        with self._calls.step(tool_calls, rts, config) as step:

            def one(i: int) -> Any:
                return self._run_one(tool_calls[i], input_type, rts[i])

            if self._reviewed(tool_calls):
                outputs = run_reviewed(one, step, config, self._where)
            elif len(tool_calls) <= 1:
                outputs = [one(i) for i in range(len(tool_calls))]
            elif (loop := step_loop()) is not None:
                run = self._calls.run_offloaded

                def offloaded(i: int) -> Any:
                    return run(tool_calls[i], rts[i], input_type)

                outputs = run_step(loop, arun_all(offloaded, step.order, config))
            else:
                outputs = run_threaded(one, step.order, config)
        return self._step_output(outputs, input_type, input, rts, config, step)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type, rts = self._open(input, config, runtime)
        INPUT_TYPE.set(input_type)  # read by `NodeCalls.awrap` for sync tools; tasks copy it
        with self._calls.step(tool_calls, rts, config) as step:

            def one(i: int) -> Any:
                return self._arun_one(tool_calls[i], input_type, rts[i])

            if self._reviewed(tool_calls):

                async def in_task(i: int) -> Any:
                    INPUT_TYPE.set(input_type)  # in the task's own context
                    return await one(i)

                outputs = await arun_reviewed(in_task, step, config, self._where)
            elif len(tool_calls) == 1:  # no task (and no loop turns) needed to run one call
                outputs = [await one(0)]
            else:
                outputs = await arun_all(one, step.order, config)
        return self._step_output(outputs, input_type, input, rts, config, step)

    def _step_output(
        self,
        outputs: list[Any],
        input_type: InputType,
        input: Any,
        rts: list[ToolRuntime],
        config: RunnableConfig,
        step: Step,
    ) -> Any:
        """ToolNode's output of `step`, with what its end writes to the graph state
        (`adapters.rollback.finish_node_step`): `input`, or the state a `Send` payload
        carries (each call's runtime holds it). Nothing to do (the hot path) when every
        answer is a message as the tool gave it and no rollback is being counted."""
        output = self._combine_tool_outputs(outputs, input_type)
        state = rts[0].state if rts else input
        if (
            not self._rollbacks
            and all(type(o) is ToolMessage and not o.response_metadata for o in outputs)
            and not (isinstance(state, dict) and state.get(LEDGER_KEY))
        ):
            return output
        output = with_error_records(
            output, state, key=self._errors_key, messages_key=self._messages_key,
            dropped=partial(self._errors_dropped.dropped, self._where),
        )  # fmt: skip
        return finish_node_step(
            output, input, step=step, state=state, messages_key=self._messages_key,
            ledger_key=LEDGER_KEY, memory=self._rollbacks, thread_id=thread_id_of(config),
        )  # fmt: skip
