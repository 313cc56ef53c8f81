"""`ResilientTool`: any LangChain tool, or a plain function, behind the pipeline.

The wrapper keeps the tool's name, description and argument schema, so it can be bound
to a model, put in a plain `ToolNode` or given to `create_agent` like the original.
Called with a tool call it answers with a `ToolMessage` (an error envelope on failure);
called with plain arguments, the tool's output, or the envelope as a JSON string.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langchain_core.tools import tool as make_tool
from langchain_core.tools.base import _handle_tool_error as handle_tool_error
from pydantic import ConfigDict, PrivateAttr

from ..core.call import DIRECT_CALL_PREFIX, Call
from ..core.errors import HandledByTool, UsageError
from ..core.idempotency import INJECTED_ARG, execution_args, keyed_config, use_key
from ..core.policy import PolicyResolver, ToolPolicy
from ..core.review import NO_INTERRUPT
from ..core.tools import (
    expect_tool,
    graph_store,
    has_native_async,
    has_sync,
    split_args,
    step_id_of,
    thread_id_of,
)
from ..observe.stats import StatsSnapshot
from ..pipeline import Outcome, Pipeline
from ..runtime.deadline import deadline_of
from ..runtime.executor import TimedRunner
from ..runtime.isolate import check_picklable
from ..runtime.loop import run_for
from ..text.envelope import envelope, failure_message, success_message, take_error_record

log = logging.getLogger(__name__)


class ResilientTool(BaseTool):
    """A `BaseTool` that runs another tool through the resilience pipeline.

    Build it with `ResilientTool.wrap(tool, policy=...)`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    """The wrapped tool."""
    policy: ToolPolicy | None = None
    """The policy of this tool (`None`: the defaults)."""
    patterns: Mapping[str, ToolPolicy] | None = None
    """``{fnmatch_pattern: ToolPolicy}`` defaults by name; `policy` overrides the fields
    it sets (see `PolicyResolver`)."""

    _pipeline: Pipeline = PrivateAttr()
    _native_async: bool = PrivateAttr()
    _exec: BaseTool = PrivateAttr()
    """What runs: `inner`, or a copy that raises its errors (the pipeline handles them)."""
    _sync: bool = PrivateAttr()  # whether `_exec` can run sync (not an MCP tool)

    @classmethod
    def wrap(
        cls,
        tool: BaseTool | Callable[..., Any],
        *,
        policy: ToolPolicy | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
        runner: TimedRunner | None = None,
        store: Any = None,
    ) -> ResilientTool:
        """Wrap a `BaseTool` or a plain function (made a tool with ``@tool`` rules).

        `store`: a LangGraph ``BaseStore`` (e.g. ``PostgresStore``) or a ``redis.Redis``
        client in which the breaker, dedup ledger and caches are shared by every worker
        (see `Shared.backend`).
        """
        if isinstance(tool, ResilientTool):
            raise UsageError(f"{tool.name!r} is already a ResilientTool")
        if not isinstance(tool, BaseTool):
            tool = make_tool(expect_tool(tool, "ResilientTool.wrap: tool"))
        if policy is not None and policy.timeouts.isolate:
            check_picklable(tool)
        if policy is not None and policy.unknown_outcome.action == "interrupt":
            raise UsageError(NO_INTERRUPT)
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
            patterns=patterns,
        )
        if runner is not None or store is not None:
            wrapped._pipeline = Pipeline(wrapped._resolver(), runner=runner, store=store)
        wrapped.pipeline.check_ignored({wrapped.name: tool})  # a retry or hedge on a write: said
        return wrapped

    def model_post_init(self, context: Any, /) -> None:
        self._pipeline = Pipeline(self._resolver())
        self._native_async = has_native_async(self.inner)
        self._exec = self.inner
        if self.inner.handle_tool_error:  # answered by `_own_answer`, for plain calls too
            self._exec = self.inner.model_copy(update={"handle_tool_error": False})
        self._sync = has_sync(self._exec)

    def _resolver(self) -> PolicyResolver:
        # `policy` is the tool's default; with `patterns`, its own policy over them.
        own = {self.name: self.policy} if self.policy is not None and self.patterns else None
        return PolicyResolver(None if own else self.policy, own, self.patterns)

    @property
    def pipeline(self) -> Pipeline:
        return self._pipeline

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls made through this tool (a snapshot)."""
        return self.pipeline.stats()

    @property
    def func(self) -> Callable[..., Any] | None:
        """The wrapped tool's function, so that LangGraph finds its injected arguments."""
        return getattr(self.inner, "func", None)

    @property
    def coroutine(self) -> Callable[..., Any] | None:
        return getattr(self.inner, "coroutine", None)

    def _new_call(self, input: Any, config: RunnableConfig | None) -> tuple[Call, bool, Pipeline]:
        is_tool_call = isinstance(input, dict) and input.get("type") == "tool_call"
        if is_tool_call:
            call_id, raw = str(input.get("id") or ""), input.get("args", {})
        else:
            call_id, raw = f"{DIRECT_CALL_PREFIX}{uuid.uuid4().hex[:12]}", input
        visible, injected = split_args(self.inner, raw if isinstance(raw, dict) else {})
        private = self.__pydantic_private__ or {}  # `self._exec`: ~4 µs a read (pydantic)
        call = private["_pipeline"].new_call(
            call_id=call_id,
            name=self.name,
            args=visible,
            tool=self.inner,
            valid_tools=(self.name,),
            injected=injected,
            thread_id=thread_id_of(config),
            step=step_id_of(config),
            deadline=deadline_of(config),
            offload=not private["_native_async"],
            store=graph_store(config),
            config=config,  # what identifies a kept result (`core.reads`)
        )
        plain = None if isinstance(raw, dict) else raw
        if not is_tool_call and isinstance(injected.get(INJECTED_ARG), str):
            use_key(call, injected[INJECTED_ARG])  # a developer's own key wins
        call.schemaless = plain is not None

        def tool_input(c: Call) -> Any:
            if plain is not None:
                return plain
            merged = execution_args(c)
            if is_tool_call:
                return {**input, "args": merged}
            return merged

        tool = private["_exec"]
        if private["_sync"]:
            run: Callable[[Call], Any] = lambda c: tool.invoke(tool_input(c), keyed_config(c, config))  # noqa: E731 # fmt: skip
        else:  # async-only (MCP): run its coroutine on a private loop, cancelled on time
            run = lambda c: run_for(  # noqa: E731
                c, lambda: tool.ainvoke(tool_input(c), keyed_config(c, config)), self.inner
            )
        arun: Callable[[Call], Awaitable[Any]] = lambda c: tool.ainvoke(  # noqa: E731
            tool_input(c), keyed_config(c, config)
        )
        if tool is not self.inner:  # the inner tool's own handle_tool_error answers
            call.run, call.arun = self._own_answer(run), self._aown_answer(arun)
        else:
            call.run, call.arun = run, arun
        return call, is_tool_call, private["_pipeline"]

    def _answer_of(self, exc: ToolException, call: Call) -> ToolMessage:
        """What the inner tool's own ``handle_tool_error`` answers to `exc`: a ToolMessage
        with ``status="error"``, however the wrapper was invoked (a `HandledByTool`)."""
        flag: Any = self.inner.handle_tool_error
        content: Any = handle_tool_error(exc, flag=flag)
        return ToolMessage(content=content, name=self.name, tool_call_id=call.id, status="error")

    def _own_answer(self, run: Callable[[Call], Any]) -> Callable[[Call], Any]:
        def answered(c: Call) -> Any:
            try:
                return run(c)
            except ToolException as exc:
                return self._answer_of(exc, c)

        return answered

    def _aown_answer(
        self, arun: Callable[[Call], Awaitable[Any]]
    ) -> Callable[[Call], Awaitable[Any]]:
        async def answered(c: Call) -> Any:
            try:
                return await arun(c)
            except ToolException as exc:
                return self._answer_of(exc, c)

        return answered

    def _answer(self, outcome: Outcome, is_tool_call: bool) -> Any:
        call = outcome.call
        failure = outcome.failure
        if is_tool_call:
            if failure is not None:
                message = failure_message(failure, call)
                take_error_record(message)  # a tool is no graph node: no state to write
                return message
            return success_message(outcome.value, call)
        if failure is not None:
            if isinstance(failure.cause, HandledByTool):  # the tool's own answer, as text
                return failure_message(failure, call).content
            return json.dumps(envelope(failure, call))
        value = outcome.value
        record = call.record
        repaired = call.repair_notice
        if repaired is not None:  # for a model, and no ToolMessage carries it: logged
            log.info("%s: %s", self.name, repaired)
            record.notices = [n for n in record.notices if n != repaired]
        if record.notices:  # a stale, reused or substitute result says so, even as text
            msg = success_message(value, call)
            return msg.content if isinstance(msg, ToolMessage) else value
        return value  # the tool's own value, whatever its type

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call, is_tool_call, pipeline = self._new_call(input, config)
        return self._answer(pipeline.run(call), is_tool_call)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call, is_tool_call, pipeline = self._new_call(input, config)
        return self._answer(await pipeline.arun(call), is_tool_call)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("run_manager", None)
        return self.invoke(kwargs or (args[0] if args else {}))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("run_manager", None)
        return await self.ainvoke(kwargs or (args[0] if args else {}))
