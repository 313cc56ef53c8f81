"""A healthy call leaves nothing for the garbage collector: what the layer makes for a
call is freed by reference counting when the call ends.

A call's objects that refer to each other in a cycle (a closure that names the call that
keeps it, a callback that names itself) outlive the call until a collection finds them.
Each such call allocates toward the next collection, and a full one walks the whole heap
of a process that imports LangChain (about 100 ms of CPU), stopping every thread of it.
On a machine with five times as many busy processes as cores that took 0.6-0.9 s of
wall time: the hedged sync benchmark's p99 at that load went from 0.3x to 0.8x ToolNode's
in the runs that met one. ToolNode itself leaves no cycle per call; nor may we.

Every adapter, sync and async, a graph built once and invoked again; the default policy,
one that turns most stages on, and a hedged read (its race made, no hedge sent).
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    Hedge,
    Limits,
    ResultChecks,
    RetryPolicy,
    ToolPolicy,
)

from .conftest import Harness

PKG = str(Path(sys.modules["langchain_resilient_tools"].__file__ or "").parent)
RUNS = 5


@tool
def search_docs(query: str) -> str:
    """Search the docs."""
    return f"found {query}"


POLICIES: dict[str, Callable[[], ToolPolicy | None]] = {
    "default": lambda: None,
    "most-stages-on": lambda: ToolPolicy(
        cache=Cache(ttl_s=60),
        fallback=Fallback(stale_s=600),
        retry=RetryPolicy(max_attempts=3),
        breaker=BreakerPolicy(),
        results=ResultChecks(checks=[lambda value: None]),
        limits=Limits(max_concurrency=4),
        timeout=5,
    ),
    "hedged": lambda: ToolPolicy(hedge=Hedge(delay=30.0)),
}


def _code(obj: Any) -> CodeType | None:
    for name in ("__code__", "f_code", "cr_code", "gi_code", "ag_code"):
        code = getattr(obj, name, None)
        if isinstance(code, CodeType):
            return code
    return None


def ours(obj: Any) -> str | None:
    """What `obj` is, when the package made it (an object of one of its classes, or a
    function, frame or coroutine of its code); `None` otherwise."""
    if type(obj).__module__.startswith("langchain_resilient_tools"):
        return type(obj).__qualname__
    code = _code(obj)
    if code is not None and code.co_filename.startswith(PKG):
        return f"{type(obj).__name__} {code.co_qualname}"
    return None


class Cycles:
    """What the package made that only the garbage collector frees, during the block:
    the collector off, then one collection that keeps what it found (``gc.garbage``)."""

    def __init__(self) -> None:
        self.found: Counter[str] = Counter()

    def __enter__(self) -> Cycles:
        gc.collect()
        self._enabled = gc.isenabled()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            gc.collect()
            self.found.update(name for obj in gc.garbage if (name := ours(obj)) is not None)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            if self._enabled:
                gc.enable()


@pytest.fixture
def cycles() -> Iterator[Cycles]:
    yield Cycles()


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_a_healthy_call_leaves_no_reference_cycle(
    harness: Harness, policy_name: str, cycles: Cycles
) -> None:
    policy = POLICIES[policy_name]()

    def payload(n: int) -> Any:
        call = {"name": "search_docs", "args": {"query": f"q{n}"}, "id": f"c{n}", "type": "tool_call"}  # fmt: skip
        ai = AIMessage("", tool_calls=[call])
        if harness.adapter == "middleware":
            return ai, {"messages": [HumanMessage("go")]}
        return ai, {"messages": [ai]}

    ai, first = payload(0)
    script = [ai, AIMessage("done")] * (RUNS + 1) if harness.adapter == "middleware" else None
    graph = harness.build([search_docs], policy=policy, ai=ai, script=script)
    state = harness.invoke(graph, first)  # warm: plans made, schemas read
    assert state["messages"][-1 if harness.adapter != "middleware" else -2].content == "found q0"
    with cycles:
        for n in range(1, RUNS + 1):
            state = harness.invoke(graph, payload(n)[1])
    assert not cycles.found, f"left for the collector by {RUNS} calls: {dict(cycles.found)}"


def test_the_check_sees_a_cycle_the_package_makes(cycles: Cycles) -> None:
    """The check itself: a call kept by a closure it keeps is found."""
    from langchain_resilient_tools.core.call import CallRecord

    with cycles:
        record = CallRecord(tool="t", call_id="c")
        holder: list[Any] = [record]
        holder.append(holder)
        del record, holder
    assert cycles.found["CallRecord"] == 1
