"""Each tool call of a `ResilientToolNode` step, through the pipeline.

ToolNode hands every call to its ``wrap_tool_call`` / ``awrap_tool_call`` hook with
the request and an ``execute`` that runs the tool: `NodeCalls.wrap` / `awrap` are
those hooks. Each makes the request's `Call` (one of its step's, found by the call's
runtime while the step is open), runs it through the pipeline, and answers it
(`ErrorAnswers`, marked for the end of the step). The tool runs with
what the stages made of the call (repaired arguments, an idempotency key); a user's own
wrapper runs inside the pipeline, between the stages and the tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime

from ..core.call import Call
from ..core.errors import UnknownTool
from ..core.idempotency import keyed_request, takes_key
from ..core.tools import INVALID_KEY, has_native_async, thread_id_of
from ..pipeline import Outcome, Pipeline, Step
from ..runtime.deadline import deadline_of
from ..runtime.offload import bridged, offloaded
from .context import INPUT_TYPE, RERUN
from .layers import Layers
from .node_io import ErrorAnswers, InputType

Execute = Callable[[ToolCallRequest], Any]
"""ToolNode's sync ``execute``: runs the tool for a request."""
ToolCallWrapper = Callable[[ToolCallRequest, Execute], Any]
AsyncToolCallWrapper = Callable[
    [ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]
]
RunSync = Callable[[ToolCallRequest, InputType, RunnableConfig], Any]
"""ToolNode's `_execute_tool_sync`: runs a sync tool for a request."""


class NodeCalls:
    """The node's calls: made, run through the pipeline and answered (see the module)."""

    def __init__(
        self,
        pipeline: Pipeline,
        errors: ErrorAnswers,
        layers: Layers,
        run_sync: RunSync,
        *,
        node: str,
        user_wrap: ToolCallWrapper | None,
        user_awrap: AsyncToolCallWrapper | None,
    ) -> None:
        self.pipeline = pipeline
        self.errors = errors
        self.layers = layers
        self.run_sync = run_sync
        self.node = node
        self.user_wrap, self.user_awrap = user_wrap, user_awrap
        self.steps: dict[int, tuple[Step, dict[str, Any]]] = {}
        """The open step of each `ToolRuntime` of a running step, by the runtime's id,
        with what every call of it shares (`_shared`)."""
        self.passthrough = user_wrap is not None or user_awrap is not None
        """A user's wrapper may answer a call to an unknown tool (`Call.passthrough_unknown`)."""
        self.use_tools({})

    def use_tools(self, tools: dict[str, BaseTool]) -> None:
        """The node's tools, by name (known once `ToolNode` has read them)."""
        self.tools = tools
        self.names = tuple(tools)
        self.keyless = frozenset(n for n, t in tools.items() if not takes_key(t))
        """The tools that take no idempotency key (`core.idempotency.keyed_request`)."""

    def _shared(self, runtime: Any) -> dict[str, Any]:
        """What every call made under `runtime` (one of a step's, which all share its
        thread, deadline, context and store) takes from it, and a note that LangGraph
        ran the node again (its ``retry_policy``)."""
        self.layers.note_rerun(runtime, self.node)
        config = runtime.config if runtime else None
        return {
            "thread_id": thread_id_of(config),
            "deadline": deadline_of(config),
            "context": getattr(runtime, "context", None),
            "store": getattr(runtime, "store", None),
            "passthrough_unknown": self.passthrough,
            "tool_validates": self.errors.handle is not True,  # ToolNode's own handling decides
        }

    @contextmanager
    def step(
        self, tool_calls: Sequence[ToolCall], runtimes: list[ToolRuntime], config: RunnableConfig
    ) -> Iterator[Step]:
        """The pipeline's step of `tool_calls`, found by each call through its runtime
        until the step is done; what its calls share is read once, off its first runtime."""
        state = runtimes[0].state if runtimes else None
        step = self.pipeline.open_step(tool_calls, state, config)
        if runtimes:
            opened = (step, self._shared(runtimes[0]))
            for rt in runtimes:
                self.steps[id(rt)] = opened
        try:
            yield step
        finally:  # the step is closed: its runtimes no longer find it
            for rt in runtimes:
                self.steps.pop(id(rt), None)

    def step_of(self, runtime: Any) -> Step:
        """The open step of a call's `runtime`, or the pipeline's loose one."""
        opened = self.steps.get(id(runtime))
        return self.pipeline.loose_step if opened is None else opened[0]

    def _new_call(self, request: ToolCallRequest) -> Call:
        tc = request.tool_call
        runtime = request.runtime
        opened = self.steps.get(id(runtime))
        if opened is None:  # a call outside the steps the node opened
            step, shared = self.pipeline.loose_step, self._shared(runtime)
        else:
            step, shared = opened
        call = self.pipeline.new_call(
            of_step=step,
            call_id=tc["id"] or "",
            name=tc["name"],
            args=dict(tc["args"]) if isinstance(tc["args"], dict) else {},
            tool=request.tool,
            valid_tools=self.names,
            state=request.state,
            config=runtime.config if runtime else None,
            rerun=RERUN.get(),  # a write a person chose to run again
            **shared,
        )
        bad: Any = tc.get(INVALID_KEY)  # type: ignore[misc]
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
            raise UnknownTool(request.tool_call["name"], self.names)

    def _execute(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any], call: Call
    ) -> Any:
        """Run `call` as `request` says, with what the stages made of it, by ToolNode's
        `execute` (sync or async)."""
        tc: Any = request.tool_call
        if (  # the hot path: nothing to change, the request runs as ToolNode made it
            call.name in self.keyless
            and not call.resolved.keyed
            and INVALID_KEY not in tc
            and tc["args"] == call.args
        ):
            return execute(request)
        req = self._request_for(request, call)
        self._guard(req)
        return execute(req)

    def answer(self, outcome: Outcome, request: ToolCallRequest) -> Any:
        """The answer to a finished call: the tool's own message when the layer did
        nothing visible to it (`Step.as_answered`), else `ErrorAnswers`', marked for the
        end of the step (`Step.answer`: a question for a person among the marks)."""
        if Step.as_answered(outcome):
            return outcome.value
        step = self.step_of(request.runtime)
        return step.answer(outcome, self.errors.answer(outcome))

    def sync_call(self, request: ToolCallRequest, execute: Execute) -> Call:
        """The `Call` for `request`, run by the sync `execute` (through a user wrapper).
        Its runner is handed the call (no closure over it): freed when it ends, no cycle."""
        call, user = self._new_call(request), self.user_wrap
        if user is None:
            call.run = partial(self._execute_bridged, request, execute)
        else:
            call.run = partial(self._user_run, user, request, execute)
        return call

    def _execute_bridged(self, request: ToolCallRequest, execute: Execute, call: Call) -> Any:
        """`_execute` by the sync `execute`; an async-only tool runs its coroutine."""
        return self._execute(request, lambda req: execute(bridged(req, call)), call)

    def _user_run(
        self, user: ToolCallWrapper, request: ToolCallRequest, execute: Execute, call: Call
    ) -> Any:
        """`call` through the `user`'s sync wrapper, which runs the tool by `execute`."""

        def guarded(req: ToolCallRequest) -> Any:
            self._guard(req)
            return execute(bridged(req, call))

        return user(self._request_for(request, call), guarded)

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Any:
        """ToolNode's sync ``wrap_tool_call`` hook."""
        return self.answer(self.pipeline.run(self.sync_call(request, execute)), request)

    async def awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        """ToolNode's ``awrap_tool_call`` hook."""
        user = self.user_awrap
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
                    return self.run_sync(req, input_type, req.runtime.config)

                call.run = run_sync
                call.offload = True
        else:

            def guarded_offloaded(c: Call, req: ToolCallRequest) -> Awaitable[Any]:
                self._guard(req)
                # Behind a user's wrapper a sync tool still runs on the pipeline's workers
                # (as attempt `c`: a hedge is stamped on its own probe, `core.probe`).
                return execute(offloaded(req, c, self.pipeline.env.runner))

            call.arun = lambda c: user(self._request_for(request, c), partial(guarded_offloaded, c))
        return self.answer(await self.pipeline.arun(call), request)

    async def run_offloaded(
        self, tool_call: ToolCall, runtime: ToolRuntime, input_type: InputType
    ) -> Any:
        """One call of a sync step on the step's private loop: ToolNode's `_run_one`
        with the stages awaited here and the (sync) tool run on the pipeline's workers."""
        request = ToolCallRequest(
            tool_call=tool_call,
            tool=self.tools.get(tool_call["name"]),
            state=runtime.state,
            runtime=runtime,
        )
        config = runtime.config
        call = self.sync_call(request, lambda req: self.run_sync(req, input_type, config))
        call.offload = True
        outcome = await self.pipeline.arun(call, sync_callbacks=True)
        if Step.as_answered(outcome):
            return outcome.value
        step = self.step_of(runtime)
        return step.answer(outcome, self.errors.answer(outcome))
