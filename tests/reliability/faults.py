"""Fault-injecting tools and the randomised scenarios they are used in.

A `Scenario` is one AIMessage's worth of tool calls (valid, duplicate, unknown and
malformed) against tools that each misbehave in one way. `scenarios()` is the
hypothesis strategy; `build_tools` turns a scenario into real LangChain tools that
record every execution in a `Ledger`.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.types import interrupt

BEHAVIOURS = (
    "ok",
    "hang",
    "flap1",  # one transient ConnectionError per query, then success
    "flap2",  # two transient ConnectionErrors per query, then success
    "value_error",
    "tool_exception",
    "runtime_error",
    "none",
    "empty",
    "huge",
    "interrupt",
)
GARBAGE = frozenset({"none", "empty", "huge"})
RAISES = frozenset({"value_error", "tool_exception", "runtime_error"})
RUNNABLE = frozenset({"valid", "dup", "repairable"})
"""Call kinds that may reach their tool."""
HANG_TIMEOUT = 0.05
"""Per-attempt timeout of hanging tools, in seconds."""
OTHER_TIMEOUT = 30.0
"""Per-attempt timeout of the other tools: generous (a busy machine can stall a run for
seconds), so only real hangs time out."""
HANG_LIMIT = 40.0
"""How long a hung tool waits at most, if the scenario never releases it (bounds a failing
example, and hypothesis' shrinking of it); well above the timing check's margin
(`invariants.TIME_MARGIN`), so that a hang that was not cut shows."""
HUGE = "huge:" + "x" * 200_000


@dataclass(frozen=True)
class ToolSpec:
    name: str
    behaviour: str
    idempotent: bool
    native_async: bool
    sync_code: bool = True
    """False: async-only (as MCP tools are), so sync paths must run its coroutine."""


@dataclass(frozen=True)
class CallSpec:
    id: str
    kind: str
    """``valid``, ``dup`` (same name and args as an earlier call), ``unknown``, ``malformed``
    (truncated JSON: never run) or ``repairable`` (JSON the repair stage may fix, then run)."""
    tool: str
    query: str


@dataclass(frozen=True)
class Scenario:
    tools: tuple[ToolSpec, ...]
    calls: tuple[CallSpec, ...]
    max_attempts: int

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def has_interrupt(self) -> bool:
        return any(c.kind in RUNNABLE and self.behaviour(c) == "interrupt" for c in self.calls)

    def behaviour(self, call: CallSpec) -> str | None:
        spec = self.tool(call.tool)
        return spec.behaviour if spec else None

    def faults(self) -> int:
        """Calls that meet a fault: a misbehaving tool, or a malformed/unknown/duplicate call."""
        return sum(
            1 for c in self.calls if c.kind != "valid" or self.behaviour(c) not in ("ok", None)
        )


@st.composite
def scenarios(draw: st.DrawFn, max_calls: int = 7) -> Scenario:
    """One AIMessage mixing every kind of call against 1-4 misbehaving tools."""
    n_tools = draw(st.integers(1, 4))
    tools = []
    for i in range(n_tools):
        behaviour = draw(st.sampled_from(BEHAVIOURS))
        idempotent = draw(st.booleans())
        prefix = "get" if idempotent else "create"
        native_async, sync_code = draw(
            st.sampled_from(((False, True), (True, True), (True, False)))
        )
        tools.append(
            ToolSpec(f"{prefix}_{behaviour}_{i}", behaviour, idempotent, native_async, sync_code)
        )
    calls: list[CallSpec] = []
    interrupted = False
    for i in range(draw(st.integers(1, max_calls))):
        kind = draw(
            st.sampled_from(
                ("valid", "valid", "valid", "dup", "unknown", "malformed", "repairable")
            )
        )
        firsts = [c for c in calls if c.kind == "valid" and _behaviour(tools, c) != "interrupt"]
        if kind == "dup" and firsts:
            twin = draw(st.sampled_from(firsts))
            calls.append(CallSpec(f"c{i}", "dup", twin.tool, twin.query))
            continue
        spec = draw(st.sampled_from(tools))
        one_interrupt = spec.behaviour == "interrupt" and (interrupted or kind == "repairable")
        if kind == "unknown" or one_interrupt:
            calls.append(CallSpec(f"c{i}", "unknown", f"get_missing_{i}", f"q{i}"))
        elif kind in ("malformed", "repairable"):
            calls.append(CallSpec(f"c{i}", kind, spec.name, f"q{i}"))
        else:
            interrupted = interrupted or spec.behaviour == "interrupt"
            calls.append(CallSpec(f"c{i}", "valid", spec.name, f"q{i}"))
    return Scenario(tuple(tools), tuple(calls), draw(st.integers(1, 3)))


def _behaviour(tools: list[ToolSpec], call: CallSpec) -> str | None:
    return next((t.behaviour for t in tools if t.name == call.tool), None)


@dataclass
class Ledger:
    """Executions per (tool, query), and the event that hung sync tools wait on."""

    release: threading.Event = field(default_factory=threading.Event)
    executions: Counter[tuple[str, str]] = field(default_factory=Counter)
    cancelled: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _flaps: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, name: str, query: str) -> None:
        with self._lock:
            self.executions[(name, query)] += 1

    def flap(self, name: str, query: str, failures: int) -> bool:
        """Whether this execution of a flapping tool fails (the first `failures` per query)."""
        with self._lock:
            self._flaps[(name, query)] += 1
            return self._flaps[(name, query)] <= failures


def expected_result(spec: ToolSpec, query: str) -> str:
    """The content a tool that answers returns for `query` (ok, flap and interrupt tools)."""
    if spec.behaviour == "interrupt":
        return f"approved:yes:{query}"
    return f"{spec.name}:{query}"


def _outcome(spec: ToolSpec, ledger: Ledger, query: str) -> Any:
    """What the tool does after it started (shared by its sync and async bodies)."""
    b = spec.behaviour
    if b.startswith("flap") and ledger.flap(spec.name, query, int(b[-1])):
        raise ConnectionError(f"upstream reset while serving {query}")
    if b == "value_error":
        raise ValueError(f"bad query {query!r}")
    if b == "tool_exception":
        raise ToolException(f"no data for {query}")
    if b == "runtime_error":
        raise RuntimeError("internal invariant broken")
    if b == "none":
        return None
    if b == "empty":
        return {}
    if b == "huge":
        return HUGE
    if b == "interrupt":
        answer = interrupt({"approve": query})
        return f"approved:{answer}:{query}"
    return expected_result(spec, query)


def build_tool(spec: ToolSpec, ledger: Ledger) -> BaseTool:
    """A real tool behaving as `spec` says, recording each execution in `ledger`."""

    def run(query: str = "") -> Any:
        ledger.record(spec.name, query)
        if spec.behaviour == "hang":
            ledger.release.wait(HANG_LIMIT)
            return "late"
        return _outcome(spec, ledger, query)

    async def arun(query: str = "") -> Any:
        ledger.record(spec.name, query)
        if spec.behaviour == "hang":
            try:
                await asyncio.sleep(HANG_LIMIT)
            except asyncio.CancelledError:
                ledger.cancelled.append(spec.name)
                raise
            return "late"
        return _outcome(spec, ledger, query)

    return StructuredTool.from_function(
        func=run if spec.sync_code else None,
        coroutine=arun if spec.native_async else None,
        name=spec.name,
        description=f"A {spec.behaviour} tool.",
    )
