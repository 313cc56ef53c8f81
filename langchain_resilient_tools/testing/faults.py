"""Tool-side faults: wrap tools so that some executions fail the way services fail.

`with_faults(tool, plan)` returns a tool with the same name, description and argument
schema, whose executions meet a `Fault` drawn by `FaultPlan.draw`. The draw is a pure
hash of the plan's seed, the tool, the arguments the model sent and how many times that
call has run through the wrapper, so two runs that make the same logical calls meet the
same faults, however many other calls they make. `FaultLog` records every execution:
which fault it met, and whether the tool body ran to completion (its effect happened).

What each fault does, and what it means for a write:

======================  ==========================================================
``REFUSED``             `ConnectionRefusedError` before the body runs: the request
                        never left; no effect.
``RESET``               `ConnectionResetError` before the body runs: no effect, but
                        the caller cannot tell it from a lost reply.
``LOST_REPLY``          the body runs (the effect happens), then
                        `ConnectionResetError`: the reply is lost.
``STALL``               waits `FaultPlan.stall_s` (meant to exceed the caller's
                        timeout), then runs the body: the effect happens late. An
                        async caller that cancels during the wait prevents it; a
                        sync thread abandoned by a timeout still runs it.
``RATE_LIMITED``        `ServiceRefused` (429, ``Retry-After``) before the body runs.
``UNAVAILABLE``         `ServiceRefused` (503, ``Retry-After``) before the body runs.
======================  ==========================================================
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools import tool as make_tool
from pydantic import BaseModel, PrivateAttr


class Fault(enum.StrEnum):
    """What goes wrong with one execution of a tool (``str()`` is the value)."""

    REFUSED = "refused"
    RESET = "reset"
    LOST_REPLY = "lost_reply"
    STALL = "stall"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"


_REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}


class ServiceRefused(Exception):
    """An HTTP-like refusal that says the request was not carried out.

    It carries what clients' errors carry: `status_code`, `retry_after` (seconds) and
    `headers` with ``Retry-After``."""

    def __init__(
        self, status_code: int = 429, retry_after: float = 0.05, message: str | None = None
    ) -> None:
        reason = _REASONS.get(status_code, "Refused")
        super().__init__(message or f"{status_code} {reason}: retry after {retry_after:g} s")
        self.status_code = status_code
        self.retry_after = float(retry_after)
        self.headers = {"Retry-After": f"{retry_after:g}"}

    def __reduce__(self) -> tuple[Any, ...]:  # pickles whole (a worker process's error)
        return (type(self), (self.status_code, self.retry_after, str(self)))


def canonical_args(args: Any) -> str:
    """`args` as canonical JSON text (sorted keys, no spaces; other values by ``str``)."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def unit_draws(*parts: object) -> tuple[float, int]:
    """Two independent draws from a SHA-256 hash of `parts`: a float in [0, 1) and a
    non-negative integer. Pure: the same parts give the same draws in every process."""
    text = "\x1f".join(str(p) for p in parts)
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64, int.from_bytes(digest[8:16], "big")


def _probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1]; got {value!r}")


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Which executions of which tools meet which fault (validated at construction)."""

    p: float = 0.3
    """Probability that an execution meets a fault."""
    faults: tuple[Fault, ...] = tuple(Fault)
    """The faults drawn from, uniformly."""
    seed: int = 0
    """Another seed, other faults at other calls."""
    stall_s: float = 2.0
    """How long a `Fault.STALL` waits before running the body (exceed your timeout)."""
    retry_after_s: float = 0.05
    """The ``Retry-After`` of `Fault.RATE_LIMITED` and `Fault.UNAVAILABLE`."""
    tools: frozenset[str] | None = None
    """Only these tool names meet faults (`None`: every wrapped tool)."""

    def __post_init__(self) -> None:
        _probability("p", self.p)
        faults = tuple(Fault(f) for f in self.faults)
        if not faults:
            raise ValueError("faults must name at least one Fault")
        if self.stall_s < 0 or self.retry_after_s < 0:
            raise ValueError("stall_s and retry_after_s must not be negative")
        object.__setattr__(self, "faults", faults)
        if self.tools is not None:
            object.__setattr__(self, "tools", frozenset(self.tools))

    def draw(self, tool: str, args: Mapping[str, Any], n: int) -> Fault | None:
        """The fault the `n`-th execution (from 0) of `tool` with `args` meets, if any.

        Pure: a hash of (seed, tool, `canonical_args`, n)."""
        if self.tools is not None and tool not in self.tools:
            return None
        u, k = unit_draws(self.seed, tool, canonical_args(args), n)
        return self.faults[k % len(self.faults)] if u < self.p else None


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """One execution that reached a faulty tool, recorded when it ended."""

    tool: str
    args: dict[str, Any]
    """The arguments the model sent (without injected values)."""
    n: int
    """Which execution of this (tool, args) it was, from 0."""
    fault: Fault | None
    effect: bool
    """Whether the tool body ran to completion (its effect happened)."""


class FaultLog:
    """Thread-safe record of every execution attempt that reached a faulty tool."""

    def __init__(self) -> None:
        self._events: list[FaultEvent] = []
        self._lock = threading.Lock()

    @property
    def events(self) -> list[FaultEvent]:
        """The events so far, in the order the executions ended (a copy)."""
        with self._lock:
            return list(self._events)

    def add(self, event: FaultEvent) -> None:
        """Record `event` (faulty tools call this when an execution ends)."""
        with self._lock:
            self._events.append(event)

    def effects(self, tool: str | None = None) -> int:
        """How many times tool bodies (of `tool`, or of any) ran to completion."""
        return sum(e.effect and (tool is None or e.tool == tool) for e in self.events)

    def count(self, fault: Fault) -> int:
        """How many executions met `fault`."""
        return sum(e.fault == fault for e in self.events)

    def clear(self) -> None:
        """Forget every event (the tools' execution counts go on)."""
        with self._lock:
            self._events.clear()


def _fields(schema: Any) -> frozenset[str]:
    if isinstance(schema, dict):
        return frozenset(schema.get("properties", {}))
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return frozenset(schema.model_fields)
    return frozenset()


def _hidden_args(tool: BaseTool) -> frozenset[str]:
    """Argument names the runtime injects (the model never sends them)."""
    try:
        visible = _fields(tool.tool_call_schema)
        full = _fields(tool.get_input_schema())
    except Exception:  # an unusual schema: every argument is the model's
        return frozenset()
    return (full | {"runtime"}) - visible


class _FaultyTool(StructuredTool):
    """`inner` with faults: ``invoke``/``ainvoke`` draw a fault, then forward the same
    input and config to `inner`. `func`/`coroutine` mirror the inner tool's, so that
    whoever inspects them (LangGraph, this package) sees the same injected arguments
    and the same sync/async abilities."""

    _inner: BaseTool = PrivateAttr()
    _plan: FaultPlan = PrivateAttr()
    _log: FaultLog | None = PrivateAttr(default=None)
    _hidden: frozenset[str] = PrivateAttr(default=frozenset())
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _begin(self, input: Any) -> tuple[dict[str, Any], int, Fault | None]:
        raw = input.get("args", {}) if _is_tool_call(input) else input
        if isinstance(raw, dict):
            args = {k: v for k, v in raw.items() if k not in self._hidden}
        else:
            args = {"input": raw}  # a single-input tool called with its text
        key = canonical_args(args)
        with self._lock:
            n = self._counts.get(key, 0)
            self._counts[key] = n + 1
        return args, n, self._plan.draw(self.name, args, n)

    def _end(self, args: dict[str, Any], n: int, fault: Fault | None, effect: bool) -> None:
        if self._log is not None:
            self._log.add(FaultEvent(self.name, args, n, fault, effect))

    def _refusal(self, fault: Fault | None) -> BaseException | None:
        """The exception `fault` raises before the body runs, if it does."""
        name = self.name
        if fault is Fault.REFUSED:
            return ConnectionRefusedError(111, f"{name}: connection refused")
        if fault is Fault.RESET:
            return ConnectionResetError(104, f"{name}: connection reset by peer")
        if fault is Fault.RATE_LIMITED:
            return ServiceRefused(429, self._plan.retry_after_s)
        if fault is Fault.UNAVAILABLE:
            return ServiceRefused(503, self._plan.retry_after_s)
        return None

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        args, n, fault = self._begin(input)
        effect = False
        try:
            refused = self._refusal(fault)
            if refused is not None:
                raise refused
            if fault is Fault.STALL:
                time.sleep(self._plan.stall_s)
            value = self._inner.invoke(input, config, **kwargs)
            effect = True
        finally:
            self._end(args, n, fault, effect)
        if fault is Fault.LOST_REPLY:
            raise ConnectionResetError(104, f"{self.name}: connection reset before the reply")
        return value

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        args, n, fault = self._begin(input)
        effect = False
        try:
            refused = self._refusal(fault)
            if refused is not None:
                raise refused
            if fault is Fault.STALL:
                await asyncio.sleep(self._plan.stall_s)
            value = await self._inner.ainvoke(input, config, **kwargs)
            effect = True
        finally:
            self._end(args, n, fault, effect)
        if fault is Fault.LOST_REPLY:
            raise ConnectionResetError(104, f"{self.name}: connection reset before the reply")
        return value


def _is_tool_call(input: Any) -> bool:
    return isinstance(input, dict) and input.get("type") == "tool_call"


def _abilities(tool: BaseTool) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """(func, coroutine) describing `tool`: its own for a structured tool; else its
    ``_run`` and, when it has its own, its ``_arun``."""
    if isinstance(tool, StructuredTool):
        return tool.func, tool.coroutine
    native = type(tool)._arun is not BaseTool._arun
    return tool._run, (tool._arun if native else None)


def with_faults(
    tool: BaseTool | Callable[..., Any], plan: FaultPlan, *, log: FaultLog | None = None
) -> BaseTool:
    """`tool` (a `BaseTool`, or a function made a tool as ``@tool`` makes one) with the
    faults of `plan`, each execution recorded in `log`.

    The result has the same name, description and argument schema, so ``bind_tools``,
    ``ToolNode``, ``create_agent`` and `ResilientTool.wrap` see the same tool; injected
    arguments reach the inner tool as before. Faults apply inside whatever wraps it:
    put resilience around faults (``ResilientTool.wrap(with_faults(t, plan))``)."""
    inner = tool if isinstance(tool, BaseTool) else make_tool(tool)
    func, coroutine = _abilities(inner)
    schema = inner.args_schema if inner.args_schema is not None else inner.get_input_schema()
    faulty = _FaultyTool(
        name=inner.name,
        description=inner.description,
        args_schema=schema,
        func=func,
        coroutine=coroutine,
        return_direct=inner.return_direct,
        response_format=inner.response_format,
        metadata=inner.metadata,
        tags=inner.tags,
        extras=inner.extras,
    )
    faulty._inner, faulty._plan, faulty._log = inner, plan, log
    faulty._hidden = _hidden_args(inner)
    return faulty


def faulty_tools(
    tools: Iterable[BaseTool | Callable[..., Any]], plan: FaultPlan, log: FaultLog | None = None
) -> list[BaseTool]:
    """`with_faults` for each of `tools`, all recording in `log`."""
    return [with_faults(t, plan, log=log) for t in tools]
