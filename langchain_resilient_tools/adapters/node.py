"""`ResilientToolNode`: LangGraph's `ToolNode` with the pipeline plugged in.

The pipeline enters through ToolNode's own `wrap_tool_call`/`awrap_tool_call` hooks, so
everything ToolNode does (input forms, injection, `Command`/`Send`, interrupts) is
untouched. A user's own wrapper still works: it runs inside the pipeline, between the
stages and the tool. This module holds the class and its wrapper (a `Call` per tool
call, run through `pipeline.driver.Pipeline`); its bases hold the rest:

- `adapters.node_io.MessageForms`: parsing, which also answers
  ``AIMessage.invalid_tool_calls`` (ToolNode skips them), and the answer of each call
  (``handle_tool_errors``, the tool's own error answers, wiring bugs raised);
- `adapters.node_step.StepNode`: the sync and async step drivers (no pool per step,
  ``max_concurrency``, ``tool_errors``, ``tool_ledger`` and rollbacks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest

from ..core.call import Call
from ..core.errors import UnknownTool
from ..core.idempotency import keyed_request, takes_key
from ..core.policy import PolicyResolver, ToolPolicy, check_policy_names
from ..core.review import asking
from ..core.tools import INVALID_KEY, expect_tools, has_native_async, thread_id_of
from ..observe.stats import StatsSnapshot
from ..pipeline import Outcome, Pipeline, Step
from ..runtime.deadline import deadline_of
from ..runtime.executor import TimedRunner
from ..runtime.isolate import check_isolated
from ..runtime.offload import bridged, offloaded
from ..state.graph import ERRORS_KEY, DroppedRecordsWarning
from .context import INPUT_TYPE, RERUN
from .layers import Layers
from .node_io import HandleToolErrors
from .node_step import StepNode
from .review import with_question

ToolCallWrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
AsyncToolCallWrapper = Callable[
    [ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]
]


class ResilientToolNode(StepNode):
    """A drop-in `ToolNode` whose every call runs through the resilience pipeline.

    Args:
        tools: As for `ToolNode`.
        policy: The default `ToolPolicy` of every tool.
        policies: ``{tool_name: ToolPolicy}``, overriding fields of `policy` per tool.
        patterns: ``{fnmatch_pattern: ToolPolicy}``, defaults by tool name (e.g.
            ``"search_*"``) between `policy` and `policies`; see `PolicyResolver`.
        store: A LangGraph ``BaseStore`` (e.g. ``PostgresStore``) in which breakers,
            dedup ledger and caches are shared by every worker; `None` keeps them
            in-process (see `Shared.backend`).
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
        self._user_wrap = wrap_tool_call
        self._user_awrap = awrap_tool_call
        self._handle = True if handle_tool_errors is None else handle_tool_errors
        self._handles_wiring = handle_tool_errors is not None  # asked for, not the default
        self._errors_key = errors_key
        self._rollbacks: dict[str, int] = {}  # per thread, when the state has no ledger
        self._steps = {}  # the running steps, by runtime (`node_step`)
        self._errors_dropped = DroppedRecordsWarning()  # said once, when state has no key
        # A sync-only user wrapper keeps ToolNode's meaning on the async path (it is
        # called with a sync executor), so the pipeline then enters through ours too.
        use_async = awrap_tool_call is not None or wrap_tool_call is None
        super().__init__(
            tools,
            name=name,
            tags=tags,
            handle_tool_errors=False,
            messages_key=messages_key,
            wrap_tool_call=self._wrap,
            awrap_tool_call=self._awrap if use_async else None,
        )
        self.pipeline = Pipeline(
            PolicyResolver(policy, policies, patterns), runner=runner, store=store
        )  # store: shared breaker/dedup/caches across workers (`state.backend`)
        self._tool_names = tuple(self.tools_by_name)
        self._tool_list = list(self.tools_by_name.values())
        check_policy_names(self.pipeline.resolver, self._tool_names)
        self.pipeline.check_ignored(self.tools_by_name)  # a retry on a write: said; reads learnt
        check_isolated(self.pipeline.resolver, self._tool_list)  # isolate=True needs pickling
        resolve = self.pipeline.resolver.resolve
        self._asking = frozenset(n for n, t in self.tools_by_name.items() if asking(resolve(n, t)))
        self._keyless = frozenset(n for n, t in self.tools_by_name.items() if not takes_key(t))
        """The tools that take no idempotency key (`core.idempotency.keyed_request`)."""
        self._layers = Layers(self.pipeline.resolver, "node")  # a retry in a user's wrapper
        self._layers.find(wrap_tool_call, awrap_tool_call)
        self._layers.check(self._tool_names, self.tools_by_name)  # a write it covers: refused

    def __repr__(self) -> str:
        # ToolNode's repr prints its attributes, our bound hooks among them: recursion.
        return f"{type(self).__name__}(name={self.name!r}, tools={list(self.tools_by_name)!r})"

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls made through this node (a snapshot)."""
        return self.pipeline.stats()

    # -- the wrapper ToolNode calls for every tool call -------------------------------

    def _new_call(self, request: ToolCallRequest) -> Call:
        tc = request.tool_call
        bad: Any = tc.get(INVALID_KEY)  # type: ignore[misc]
        self._layers.note_rerun(request, self.name or "tools")  # a node retry_policy re-ran it
        runtime = request.runtime
        config = runtime.config if runtime else None
        step = self._steps.get(id(runtime)) or self.pipeline.loose_step  # `node_step`
        call = self.pipeline.new_call(
            of_step=step,
            call_id=tc["id"] or "",
            name=tc["name"],
            args=dict(tc["args"]) if isinstance(tc["args"], dict) else {},
            tool=request.tool,
            valid_tools=self._tool_names,
            thread_id=thread_id_of(config),
            deadline=deadline_of(config),
            state=request.state,
            config=config,
            context=getattr(runtime, "context", None),
            store=getattr(runtime, "store", None),
            passthrough_unknown=self._user_wrap is not None or self._user_awrap is not None,
            tool_validates=self._handle is not True,  # ToolNode's own handling decides
            rerun=RERUN.get(),  # a write a person chose to run again
        )
        if bad is not None:
            call.raw_args = bad.get("args")
            call.parse_error = bad.get("error") or "the arguments are not valid JSON"
        return call

    @staticmethod
    def _request_for(request: ToolCallRequest, call: Call) -> ToolCallRequest:
        tc: Any = request.tool_call
        if INVALID_KEY in tc or tc["args"] != call.args:  # repaired: run what was repaired
            tc = {k: v for k, v in tc.items() if k != INVALID_KEY}
            tc["args"] = call.args
        return keyed_request(request, call, tc)

    def _guard(self, request: ToolCallRequest) -> None:
        if request.tool is None:
            raise UnknownTool(request.tool_call["name"], self._tool_names)

    def _execute(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any], call: Call
    ) -> Any:
        """Run `call` as `request` says, with what the stages made of it (repaired
        arguments, an idempotency key), by ToolNode's `execute` (sync or async)."""
        tc: Any = request.tool_call
        if (  # the hot path: nothing to change, the request runs as ToolNode made it
            call.name in self._keyless
            and not call.resolved.keyed
            and INVALID_KEY not in tc
            and tc["args"] == call.args
        ):
            return execute(request)
        req = self._request_for(request, call)
        self._guard(req)
        return execute(req)

    def _reply(self, outcome: Outcome, request: ToolCallRequest) -> Any:
        """The answer to a finished call: the tool's own message when the layer did
        nothing visible to it (`Step.as_answered`), else `_answer`'s, marked for a
        person (`with_question`) and for the end of the step (`Step.answer`)."""
        if Step.as_answered(outcome):
            return outcome.value
        answer = with_question(self._answer(outcome), outcome)
        return self._step_of(request).answer(outcome, answer)

    def _sync_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]
    ) -> Call:
        """The `Call` for `request`, run by the sync `execute` (through a user wrapper)."""

        def bridged_execute(req: ToolCallRequest) -> Any:
            return execute(bridged(req, call))  # an async-only tool runs its coroutine

        def guarded(req: ToolCallRequest) -> Any:
            self._guard(req)
            return bridged_execute(req)

        user = self._user_wrap
        call = self._new_call(request)
        if user is None:
            call.run = partial(self._execute, request, bridged_execute)
        else:
            call.run = lambda c: user(self._request_for(request, c), guarded)
        return call

    def _wrap(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        return self._reply(self.pipeline.run(self._sync_call(request, execute)), request)

    async def _awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        user = self._user_awrap
        call = self._new_call(request)
        if user is None:
            call.arun = partial(self._execute, request, execute)
            tool = request.tool
            if tool is not None and not has_native_async(tool):
                # A sync tool runs on the pipeline's own workers, where a timed-out
                # thread is counted and never holds up the event loop's executor.
                input_type = INPUT_TYPE.get()

                def run_sync(c: Call) -> Any:
                    req = self._request_for(request, c)
                    return self._execute_tool_sync(req, input_type, req.runtime.config)

                call.run = run_sync
                call.offload = True
        else:

            def guarded_offloaded(req: ToolCallRequest) -> Awaitable[Any]:
                self._guard(req)
                # Behind a user's wrapper a sync tool still runs on the pipeline's workers.
                return execute(offloaded(req, call, self.pipeline.env.runner))

            call.arun = lambda c: user(self._request_for(request, c), guarded_offloaded)
        return self._reply(await self.pipeline.arun(call), request)
