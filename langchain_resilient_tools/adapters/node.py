"""`ResilientToolNode`: LangGraph's `ToolNode` with the pipeline plugged in.

The pipeline enters through ToolNode's own `wrap_tool_call`/`awrap_tool_call` hooks, so
everything ToolNode does (input forms, injection, `Command`/`Send`, interrupts) is
untouched. A user's own wrapper still works: it runs inside the pipeline, between the
stages and the tool. Four things are overridden on purpose:

- parsing also answers ``AIMessage.invalid_tool_calls`` (ToolNode skips them);
- the sync path runs no pool per step: the stages of parallel calls are tasks of a
  private event loop of the calling thread (`runtime.steploop`), their tools run on the
  pipeline's persistent workers; where a loop already runs in the thread (Jupyter),
  the calls go to a persistent pool of threads instead;
- both paths honour ``max_concurrency`` and write error records to ``tool_errors``;
- at the end of a step, dedup entries go to ``tool_ledger`` and a ``rollback`` of a
  useless result replaces the step's answers (see `adapters.rollback.finish_node_step`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel

from ..core.call import Call
from ..core.errors import UnknownTool, for_author
from ..core.idempotency import keyed_request
from ..core.policy import PolicyResolver, ToolPolicy, check_policy_names
from ..core.tools import INVALID_KEY, has_native_async, thread_id_of
from ..observe.stats import StatsSnapshot
from ..pipeline.dedup.logic import first_twins
from ..pipeline.driver import Outcome, Pipeline
from ..runtime.deadline import deadline_of
from ..runtime.executor import TimedRunner, dispatch_pool
from ..runtime.isolate import check_isolated
from ..runtime.offload import bridged, offloaded
from ..runtime.steploop import run_step, step_loop
from ..state.graph import ERRORS_KEY, LEDGER_KEY, DroppedRecordsWarning
from ..text.classify import HandledByTool
from ..text.envelope import failure_message, success_message, take_error_record
from .rollback import annotate, finish_node_step

try:
    from langgraph.prebuilt.tool_node import _infer_handled_types
except ImportError:  # pragma: no cover - private helper moved

    def _infer_handled_types(handler: Callable[..., str]) -> tuple[type[Exception], ...]:
        return (Exception,)


ToolCallWrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
AsyncToolCallWrapper = Callable[
    [ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]
]
HandleToolErrors = bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]
_RUNTIME_FIELDS = frozenset(f.name for f in dataclasses.fields(ToolRuntime))
_INPUT_TYPE: contextvars.ContextVar[Literal["list", "dict", "tool_calls"]] = contextvars.ContextVar(
    "lrt_input_type", default="dict"
)


class ResilientToolNode(ToolNode):
    """A drop-in `ToolNode` whose every call runs through the resilience pipeline.

    Args:
        tools: As for `ToolNode`.
        policy: The default `ToolPolicy` of every tool.
        policies: ``{tool_name: ToolPolicy}``, overriding fields of `policy` per tool.
        patterns: ``{fnmatch_pattern: ToolPolicy}``, defaults by tool name (e.g.
            ``"search_*"``) between `policy` and `policies`; see `PolicyResolver`.
        store: A LangGraph ``BaseStore`` (e.g. ``PostgresStore``) in which breakers,
            dedup ledger and caches are shared by every worker; `None` keeps them
            in-process (see `ToolPolicy.state_backend`).
        handle_tool_errors: Errors the pipeline classifies (timeouts, bad arguments,
            unknown tools, ...) are always answered with the error envelope. For a plain
            exception raised by a tool (``tool_error``): `True` (default) answers with
            the envelope; `False` re-raises it; a `str` is used as the content; an
            exception type or tuple answers those types and re-raises others; a callable
            builds the content for the types its annotation names.
        errors_key: State key for error records, written when the state has that key.
        Other keyword arguments are ToolNode's (`name`, `tags`, `messages_key`,
            `wrap_tool_call`, `awrap_tool_call`) and keep their meaning.
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
        handle_tool_errors: HandleToolErrors = True,
        messages_key: str = "messages",
        wrap_tool_call: ToolCallWrapper | None = None,
        awrap_tool_call: AsyncToolCallWrapper | None = None,
        errors_key: str | None = ERRORS_KEY,
        runner: TimedRunner | None = None,
        store: Any = None,
    ) -> None:
        self._user_wrap = wrap_tool_call
        self._user_awrap = awrap_tool_call
        self._handle = handle_tool_errors
        self._errors_key = errors_key
        self._rollbacks: dict[str, int] = {}  # per thread, when the state has no ledger
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
        check_isolated(self.pipeline.resolver, self._tool_list)  # isolate=True needs pickling

    def __repr__(self) -> str:
        # ToolNode's repr prints its attributes, our bound hooks among them: recursion.
        return f"{type(self).__name__}(name={self.name!r}, tools={list(self.tools_by_name)!r})"

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls made through this node (a snapshot)."""
        return self.pipeline.stats()

    # -- input ---------------------------------------------------------------------

    def _parse_input(
        self, input: list[AnyMessage] | dict[str, Any] | BaseModel
    ) -> tuple[list[ToolCall], Literal["list", "dict", "tool_calls"]]:
        tool_calls, input_type = super()._parse_input(input)
        if input_type == "tool_calls":
            return tool_calls, input_type
        if isinstance(input, list):
            messages = input
        elif isinstance(input, dict):
            messages = input.get(self._messages_key, [])
        else:
            messages = getattr(input, self._messages_key, [])
        ai = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        if ai.invalid_tool_calls:
            seen = {tc["id"] for tc in tool_calls}
            tool_calls = list(tool_calls)
            for bad in ai.invalid_tool_calls:
                if bad.get("id") and bad["id"] not in seen:
                    marked: dict[str, Any] = {
                        "name": bad.get("name") or "",
                        "args": {},
                        "id": bad["id"],
                        "type": "tool_call",
                        INVALID_KEY: {"args": bad.get("args"), "error": bad.get("error")},
                    }
                    tool_calls.append(marked)  # type: ignore[arg-type]
        return tool_calls, input_type

    def _runtimes(
        self,
        input: Any,
        tool_calls: list[ToolCall],
        config: RunnableConfig,
        runtime: Runtime[Any],
    ) -> list[ToolRuntime]:
        shared = {
            "context": runtime.context,
            "store": runtime.store,
            "stream_writer": runtime.stream_writer,
            "tools": self._tool_list,
            "execution_info": getattr(runtime, "execution_info", None),
            "server_info": getattr(runtime, "server_info", None),
        }
        shared = {k: v for k, v in shared.items() if k in _RUNTIME_FIELDS}  # per version
        return [
            ToolRuntime(
                state=cast(Any, self._extract_state(input, cfg)),
                tool_call_id=call["id"],
                config=cfg,
                **shared,
            )
            for call, cfg in zip(tool_calls, get_config_list(config, len(tool_calls)), strict=False)
        ]

    # -- drivers -------------------------------------------------------------------

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type = self._parse_input(input)
        runtimes = self._runtimes(input, tool_calls, config, runtime)
        if len(tool_calls) <= 1:
            outputs = [
                self._run_one(tc, input_type, rt)
                for tc, rt in zip(tool_calls, runtimes, strict=True)
            ]
        elif (loop := step_loop()) is not None:
            run = partial(self._run_one_offloaded, input_type=input_type)
            coro = self._arun_all(tool_calls, runtimes, input_type, config, run=run)
            outputs = run_step(loop, coro)
        else:
            outputs = self._run_all_threaded(tool_calls, runtimes, input_type, config)
        output = self._with_errors(self._combine_tool_outputs(outputs, input_type), input)
        return self._after_step(output, input, config)

    def _run_all_threaded(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        input_type: Literal["list", "dict", "tool_calls"],
        config: RunnableConfig,
    ) -> list[Any]:
        """The calls of a sync step on threads (where an event loop already runs here)."""
        n = len(tool_calls)
        limit = config.get("max_concurrency") or n
        gate = threading.BoundedSemaphore(limit) if limit < n else None
        twins, ran = first_twins(tool_calls), [threading.Event() for _ in range(n)]

        def job(i: int) -> Any:
            if (j := twins[i]) is not None:  # identical calls: the first one runs first
                ran[j].wait()
            try:
                if gate is None:
                    return self._run_one(tool_calls[i], input_type, runtimes[i])
                with gate:
                    return self._run_one(tool_calls[i], input_type, runtimes[i])
            finally:
                ran[i].set()

        pool = dispatch_pool()
        futures = [pool.submit(_bind(contextvars.copy_context(), job, i)) for i in range(1, n)]
        first: list[Any] = []
        error: BaseException | None = None
        try:
            first.append(job(0))
        except BaseException as exc:  # re-raised once the siblings are done
            error = exc
        rest = []
        for fut in futures:
            try:
                rest.append(fut.result())
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return first + rest

    async def _run_one_offloaded(
        self,
        tool_call: ToolCall,
        tool_runtime: ToolRuntime,
        *,
        input_type: Literal["list", "dict", "tool_calls"],
    ) -> Any:
        """One call of a sync step on the step's private loop: ToolNode's `_run_one`
        with the stages awaited here and the (sync) tool run on the pipeline's workers."""
        request = ToolCallRequest(
            tool_call=tool_call,
            tool=self.tools_by_name.get(tool_call["name"]),
            state=tool_runtime.state,
            runtime=tool_runtime,
        )
        config = tool_runtime.config

        def execute(req: ToolCallRequest) -> Any:
            return self._execute_tool_sync(req, input_type, config)

        call = self._sync_call(request, execute)
        call.offload = True
        outcome = await self.pipeline.arun(call, sync_callbacks=True)
        return annotate(self._answer(outcome), outcome)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type = self._parse_input(input)
        runtimes = self._runtimes(input, tool_calls, config, runtime)
        _INPUT_TYPE.set(input_type)  # read by `_awrap` for sync tools; tasks copy it
        if len(tool_calls) == 1:  # no task (and no loop turns) needed to run one call
            outputs = [await self._arun_one(tool_calls[0], input_type, runtimes[0])]
        else:
            outputs = await self._arun_all(tool_calls, runtimes, input_type, config)
        output = self._with_errors(self._combine_tool_outputs(outputs, input_type), input)
        return self._after_step(output, input, config)

    async def _arun_all(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        input_type: Literal["list", "dict", "tool_calls"],
        config: RunnableConfig,
        *,
        run: Callable[[ToolCall, ToolRuntime], Awaitable[Any]] | None = None,
    ) -> list[Any]:
        """Every call of the step, concurrently (`run`: how one call runs; by default
        ToolNode's `_arun_one`, which enters the pipeline through `_awrap`)."""
        if run is None:
            run = partial(_call_with_type, self._arun_one, input_type)
        limit = config.get("max_concurrency")
        gate = asyncio.Semaphore(limit) if limit and limit < len(tool_calls) else None
        twins = first_twins(tool_calls)
        pairs = list(zip(tool_calls, runtimes, strict=True))
        if gate is None and not any(j is not None for j in twins):
            coros = [run(tc, rt) for tc, rt in pairs]
        else:
            ran = [asyncio.Event() for _ in tool_calls]

            async def job(i: int, tc: ToolCall, rt: ToolRuntime) -> Any:
                if (j := twins[i]) is not None:  # identical calls: the first one runs first
                    await ran[j].wait()
                try:
                    if gate is None:
                        return await run(tc, rt)
                    async with gate:
                        return await run(tc, rt)
                finally:
                    ran[i].set()

            coros = [job(i, tc, rt) for i, (tc, rt) in enumerate(pairs)]
        # Like the sync path, a call that raises (an interrupt) is re-raised only once its
        # siblings are done: none is left running in the background, and a resumed step
        # finds their answers recorded instead of running them again.
        results = await asyncio.gather(*coros, return_exceptions=True)
        outputs: list[Any] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            outputs.append(result)
        return outputs

    def _after_step(self, output: Any, input: Any, config: RunnableConfig) -> Any:
        """Dedup entries to ``tool_ledger``, and rollbacks (see `adapters.rollback`)."""
        return finish_node_step(
            output,
            input,
            messages_key=self._messages_key,
            ledger_key=LEDGER_KEY,
            memory=self._rollbacks,
            thread_id=thread_id_of(config),
        )

    def _with_errors(self, output: Any, input: Any) -> Any:
        """Error records to the state's ``tool_errors`` (when it has that key); private
        records are taken off the answers either way (`take_error_record`)."""
        messages: list[Any] = []
        if isinstance(output, dict):
            messages = output.get(self._messages_key, [])
        else:
            for item in output:
                if isinstance(item, dict):
                    messages.extend(item.get(self._messages_key, []))
                elif isinstance(item, ToolMessage):
                    messages.append(item)
        records = [r for msg in messages if (r := take_error_record(msg)) is not None]
        key = self._errors_key
        if not records or not key or not isinstance(input, dict):
            return output
        if key not in input:  # e.g. create_react_agent's default state
            self._errors_dropped.dropped(f"ResilientToolNode {self.name!r}", key)
            return output
        if isinstance(output, dict):
            return {**output, key: records}
        return [*output, {key: records}]

    # -- the wrapper ToolNode calls for every tool call -------------------------------

    def _new_call(self, request: ToolCallRequest) -> Call:
        tc = request.tool_call
        bad: Any = tc.get(INVALID_KEY)  # type: ignore[misc]
        call = self.pipeline.new_call(
            call_id=tc["id"] or "",
            name=tc["name"],
            args=dict(tc["args"]) if isinstance(tc["args"], dict) else {},
            tool=request.tool,
            valid_tools=self._tool_names,
            thread_id=thread_id_of(request.runtime.config if request.runtime else None),
            deadline=deadline_of(request.runtime.config if request.runtime else None),
            state=request.state,
            store=getattr(request.runtime, "store", None),
            passthrough_unknown=self._user_wrap is not None or self._user_awrap is not None,
            tool_validates=self._handle is not True,  # ToolNode's own handling decides
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

    def _sync_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]
    ) -> Call:
        """The `Call` for `request`, run by the sync `execute` (through a user wrapper)."""

        def guarded(req: ToolCallRequest) -> Any:
            self._guard(req)
            return execute(bridged(req, call))  # an async-only tool runs its coroutine

        user = self._user_wrap
        call = self._new_call(request)
        if user is None:
            call.run = lambda c: guarded(self._request_for(request, c))
        else:
            call.run = lambda c: user(self._request_for(request, c), guarded)
        return call

    def _wrap(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        outcome = self.pipeline.run(self._sync_call(request, execute))
        return annotate(self._answer(outcome), outcome)

    async def _awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        def guarded(req: ToolCallRequest) -> Awaitable[Any]:
            self._guard(req)
            return execute(req)

        user = self._user_awrap
        call = self._new_call(request)
        if user is None:
            call.arun = lambda c: guarded(self._request_for(request, c))
            tool = request.tool
            if tool is not None and not has_native_async(tool):
                # A sync tool runs on the pipeline's own workers, where a timed-out
                # thread is counted and never holds up the event loop's executor.
                input_type = _INPUT_TYPE.get()

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
        outcome = await self.pipeline.arun(call)
        return annotate(self._answer(outcome), outcome)

    def _answer(self, outcome: Outcome) -> ToolMessage | Command[Any] | list[Any]:
        """The call's answer, with ``handle_tool_errors`` applied as `ToolNode` applies it.

        Who gets an error: what the model can act on, and what the world did, is
        answered; what only the graph's author can fix (an invalid `Command`, an
        ``InjectedStore`` tool in a graph without a store) was raised before this point
        (`for_author`). ``handle_tool_errors`` decides only for an exception that came
        from the tool (or from its own argument validation, which a tool with
        ``handle_validation_error`` or a node with ``handle_tool_errors=False`` leaves to
        the tool): `True` (the default) answers with the envelope; `False` re-raises it;
        a `str` is the content; an exception type or tuple answers those types and
        re-raises others; a callable builds the content for the types it annotates.
        Failures the pipeline found itself (timeouts, an open circuit, a duplicate, an
        unknown tool) have no such exception and are always answered with the envelope.
        An error the tool answered itself (its ``handle_tool_error``) is its own answer.
        """
        call, failure = outcome.call, outcome.failure
        if failure is None:
            return success_message(outcome.value, call)
        cause, handle = failure.cause, self._handle
        if cause is None or handle is True or isinstance(cause, HandledByTool):
            return failure_message(failure, call)
        if handle is False:
            raise cause
        if isinstance(handle, str):
            return failure_message(failure, call, content=handle)
        if isinstance(handle, (type, tuple)):
            if isinstance(cause, handle):
                return failure_message(failure, call)
            raise cause
        if isinstance(cause, _infer_handled_types(handle)):
            return failure_message(failure, call, content=str(handle(cause)))
        raise cause

    # -- wiring bugs: raised for the graph's author, as ToolNode raises them ----------

    def _inject_tool_args(
        self, tool_call: ToolCall, tool_runtime: ToolRuntime, tool: BaseTool | None = None
    ) -> ToolCall:
        try:
            return super()._inject_tool_args(tool_call, tool_runtime, tool)
        except Exception as exc:  # e.g. InjectedStore without a store: the author's to fix
            raise for_author(exc) from None

    def _normalize_tool_response(
        self,
        response: Any,
        tool_call: ToolCall,
        input_type: Literal["list", "dict", "tool_calls"],
    ) -> Any:
        try:
            return super()._normalize_tool_response(response, tool_call, input_type)
        except (ValueError, TypeError) as exc:  # an invalid Command or return type
            raise for_author(exc) from None


def _bind(ctx: contextvars.Context, fn: Callable[[int], Any], i: int) -> Callable[[], Any]:
    return lambda: ctx.run(fn, i)


def _call_with_type(
    arun_one: Callable[..., Awaitable[Any]],
    input_type: Literal["list", "dict", "tool_calls"],
    tool_call: ToolCall,
    tool_runtime: ToolRuntime,
) -> Awaitable[Any]:
    return arun_one(tool_call, input_type, tool_runtime)
