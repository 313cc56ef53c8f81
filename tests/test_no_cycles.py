"""A healthy call leaves nothing for the garbage collector: what the layer makes for a
call is freed by reference counting when the call ends.

A call's objects that refer to each other in a cycle (a closure that names the call that
keeps it, a callback that names itself) outlive the call until a collection finds them.
Each such call allocates toward the next collection, and a full one walks the whole heap
of a process that imports LangChain (about 100 ms of CPU), stopping every thread of it.
On a machine with five times as many busy processes as cores that took 0.4-1.0 s of
wall time: the hedged sync benchmark's p99 at that load went from 0.3x to 0.8x ToolNode's
in the runs that met one. ToolNode itself leaves no cycle per call; nor may we.

Every adapter, sync and async, a graph built once and invoked again; the default policy,
one that turns most stages on, and a hedged read (its race made, no hedge sent). Then the
same for calls that fail: a read retried after one failure, a read that fails every time
(answered with the envelope after its retries), a read whose first attempt times out, a
hedged read whose hedge won (its loser let go on its thread, or cancelled). A
failure's traceback holds the frames it passed through and, by ``f_back``, their callers
as they returned: any of them that still names the failure keeps all of it in a cycle.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import tool_node as _tool_node

from langchain_resilient_tools import (
    Hedge,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.runtime import loop as private
from langchain_resilient_tools.runtime.executor import default_runner
from langchain_resilient_tools.runtime.job import Job

from . import test_call_path as call_path
from .conftest import Harness

PKG = str(Path(sys.modules["langchain_resilient_tools"].__file__ or "").parent)
RUNS = 5


@tool
def search_docs(query: str) -> str:
    """Search the docs."""
    return f"found {query}"


POLICIES: dict[str, Callable[[], ToolPolicy | None]] = {
    **call_path.POLICIES,  # the default policy, and one that turns most stages on
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
        self.edges: list[str] = []
        """What refers to what among the objects found (for the failure's message)."""

    def __enter__(self) -> Cycles:
        gc.collect()
        self._enabled = gc.isenabled()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            _settled()
            gc.collect()
            if _break_foreign(gc.garbage):
                gc.garbage.clear()  # what only their cycles kept is freed now
                gc.collect()
            self.found.update(name for obj in gc.garbage if (name := ours(obj)) is not None)
            if self.found:
                self.edges = _edges(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            if self._enabled:
                gc.enable()


def _edges(garbage: list[Any], limit: int = 60) -> list[str]:
    """``"a -> b, c"`` for each object `a` of `garbage` that refers to others of it."""
    ids = {id(obj) for obj in garbage}

    def name(obj: Any) -> str:
        if isinstance(obj, FrameType):
            return f"frame {obj.f_code.co_qualname}:{obj.f_lineno}"
        if isinstance(obj, BaseException):
            return repr(obj)[:60]
        return ours(obj) or type(obj).__qualname__

    lines = []
    for obj in garbage:
        refs = [name(r) for r in gc.get_referents(obj) if id(r) in ids]
        if refs:
            lines.append(f"{name(obj)} -> {', '.join(refs)}")
    return lines[:limit]


def _settled(limit_s: float = 2.0) -> None:
    """Wait (for at most `limit_s`) until no other thread is still in a job of ours, and
    no attempt of ours is still on the private loop: a worker wakes the job's caller
    before its own frames return, and while they run they hold what the call left (a
    failure's traceback holds them), which becomes collectable only once they have
    returned. (On a busy machine the next collection came first; the test then saw
    LangChain's own cycle there, unbroken.) A cancelled attempt of an async-only tool
    from sync code ends the same way, later: langchain-core's ``BaseTool.arun`` catches
    the cancellation and awaits its callbacks' ``on_tool_error`` before raising it
    again, after the tool itself said it was cancelled."""
    me, deadline = threading.get_ident(), time.monotonic() + limit_s
    while time.monotonic() < deadline and (
        _attempts_on_private_loop()
        or any(_in_job(frame) for tid, frame in sys._current_frames().items() if tid != me)
    ):
        threading.Event().wait(0.001)


def _attempts_on_private_loop() -> bool:
    """Whether a coroutine of `run_sync` (an attempt of an async-only tool made from sync
    code) is still running on the private loop (asked on the loop itself)."""
    loop = private.current()
    if loop is None or loop.is_closed():
        return False

    async def running() -> bool:
        return any(
            task.get_coro().__qualname__ == "run_sync.<locals>.main"  # type: ignore[union-attr]
            for task in asyncio.all_tasks()
            if not task.done()
        )

    try:
        return asyncio.run_coroutine_threadsafe(running(), loop).result(timeout=1.0)
    except (RuntimeError, TimeoutError):  # closed meanwhile, or too busy to answer
        return False


def _in_job(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is Job.run.__code__:
            return True
        frame = frame.f_back
    return False


_FOREIGN = {
    BaseTool.run.__code__,
    BaseTool.arun.__code__,
    _tool_node._handle_tool_error.__code__,
    _tool_node._default_handle_tool_errors.__code__,
}
"""Code of LangChain's and LangGraph's whose frames keep the error they raise."""


def _break_foreign(garbage: list[Any]) -> bool:
    """Clear the frames of `_FOREIGN` code in `garbage` that name the error they raised
    (or passed on); whether there were any.

    Cycles of LangChain's and LangGraph's own, made by every tool that raises, under
    ToolNode too: langchain-core 1.x's `BaseTool.run` / `arun` end with ``raise
    error_to_raise``, and langgraph-prebuilt 1.x's default ``handle_tool_errors``
    (`_default_handle_tool_errors`, called by `_handle_tool_error`, both holding the
    error as ``e``) raises the error again: each leaves the error in a local of a frame
    its traceback holds. Nothing of ours is in them, but the tracebacks of our frames
    above hang off them; what is still found once they are broken is ours."""
    frames = [
        obj
        for obj in garbage
        if isinstance(obj, FrameType) and obj.f_code in _FOREIGN and _names_its_error(obj)
    ]
    for frame in frames:
        frame.clear()
    return bool(frames)


def _names_its_error(frame: FrameType) -> bool:
    """Whether a local of `frame` is an error whose traceback holds `frame` (read through
    the collector: ``f_locals`` would keep a copy of the locals that ``clear`` leaves)."""
    for error in gc.get_referents(frame):
        if isinstance(error, BaseException):
            tb = error.__traceback__
            while tb is not None:
                if tb.tb_frame is frame:
                    return True
                tb = tb.tb_next
    return False


@pytest.fixture
def cycles() -> Iterator[Cycles]:
    yield Cycles()


def _invoke_again(
    harness: Harness,
    tool: BaseTool,
    policy: ToolPolicy | None,
    cycles: Cycles,
    check: Callable[[Any, int], None],
    after: Callable[[], None] = lambda: None,
    runs: int = RUNS,
) -> None:
    """One graph, invoked once to warm it, then `runs` times in `cycles`; `check(message,
    n)` looks at each answer, `after()` runs after each invocation."""

    def payload(n: int) -> Any:
        call = {"name": tool.name, "args": {"query": f"q{n}"}, "id": f"c{n}", "type": "tool_call"}  # fmt: skip
        ai = AIMessage("", tool_calls=[call])
        if harness.adapter == "middleware":
            return ai, {"messages": [HumanMessage("go")]}
        return ai, {"messages": [ai]}

    def answer(state: Any) -> Any:
        return state["messages"][-1 if harness.adapter != "middleware" else -2]

    ai, first = payload(0)
    script = [ai, AIMessage("done")] * (runs + 1) if harness.adapter == "middleware" else None
    graph = harness.build([tool], policy=policy, ai=ai, script=script)
    check(answer(harness.invoke(graph, first)), 0)  # warm: plans made, schemas read
    after()
    with cycles:
        for n in range(1, runs + 1):
            state = harness.invoke(graph, payload(n)[1])
            check(answer(state), 0 if harness.adapter == "middleware" else n)  # its model: q0
            after()
    assert not cycles.found, (
        f"left for the collector by {runs} calls: {dict(cycles.found)}; " + "; ".join(cycles.edges)
    )


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_a_healthy_call_leaves_no_reference_cycle(
    harness: Harness, policy_name: str, cycles: Cycles
) -> None:
    def check(message: Any, n: int) -> None:
        assert message.content == f"found q{n}"

    _invoke_again(harness, search_docs, POLICIES[policy_name](), cycles, check)


def _envelope(message: Any) -> dict[str, Any]:
    assert message.status == "error", message
    data: dict[str, Any] = json.loads(message.content)
    return data


def test_a_retried_call_leaves_no_reference_cycle(harness: Harness, cycles: Cycles) -> None:
    """Its first attempt raises, its second answers."""
    runs = [0]

    @tool
    def search_flaky(query: str) -> str:
        """Search, failing every other time."""
        runs[0] += 1
        if runs[0] % 2:
            raise ConnectionError("connection reset by peer")
        return f"found {query}"

    def check(message: Any, n: int) -> None:
        assert message.content == f"found q{n}"

    policy = ToolPolicy(retry=RetryPolicy(max_attempts=3))
    _invoke_again(harness, search_flaky, policy, cycles, check)
    assert runs[0] == 2 * (RUNS + 1)


@tool
def search_down(query: str) -> str:
    """Search a service that is down."""
    raise ConnectionError("connection refused")


@tool
async def search_down_async(query: str) -> str:
    """Search a service that is down (async only: sync code runs it on a loop of ours)."""
    raise ConnectionError("connection refused")


@tool
def send_down(query: str) -> str:
    """Send to a service that is down (a write: its attempts are watched, `Call.job`)."""
    raise ConnectionRefusedError(111, "Connection refused")


@pytest.mark.parametrize(
    "down", [search_down, search_down_async, send_down], ids=["sync-tool", "async-tool", "write"]
)
def test_a_failed_call_leaves_no_reference_cycle(
    harness: Harness, down: BaseTool, cycles: Cycles
) -> None:
    """Every attempt raises: the call is answered with the envelope after its retries
    (a write's too: a refused connection never reached the service)."""

    def check(message: Any, n: int) -> None:
        data = _envelope(message)
        assert (data["error"], data["attempts"]) == ("transient_failure", 3)

    policy = ToolPolicy(retry=RetryPolicy(max_attempts=3, budget=None), breaker=None)
    _invoke_again(harness, down, policy, cycles, check)


def test_a_call_that_timed_out_once_leaves_no_reference_cycle(
    harness: Harness, cycles: Cycles
) -> None:
    """Its first attempt hangs past the (real, short) timeout and is left on its thread,
    a later one answers; the one left behind is let go after each call and has ended
    before the next (its late end is part of what is looked at)."""
    first = FirstAttemptHangs(harness)

    def check(message: Any, n: int) -> None:
        assert message.content == f"found q{n}"
        assert first.late and not first.hang  # the call's first attempt hung

    # Three attempts: one that hangs, and two chances for an answer within the deadline.
    policy = ToolPolicy(timeout=0.1, retry=RetryPolicy(max_attempts=3))
    _invoke_again(harness, first.tool, policy, cycles, check, after=first.let_go, runs=2)
    assert len(first.late) == 3


class FirstAttemptHangs:
    """A read whose first attempt of each call hangs on its thread until `let_go` (called
    after the call: it has then ended, and its worker is free); any other answers."""

    def __init__(self, harness: Harness) -> None:
        self.hang, self.release = True, threading.Event()
        self.late: list[threading.Event] = []
        harness.releases.append(self.release)

        @tool
        def search_slow(query: str) -> str:
            """Search, hanging on the first attempt of each call."""
            if self.hang:
                self.hang = False
                self.late.append(ended := threading.Event())
                self.release.wait(10)
                ended.set()
                return "late"
            return f"found {query}"

        self.tool = search_slow

    def let_go(self) -> None:
        self.release.set()
        assert all(ended.wait(10) for ended in self.late)
        pause = threading.Event()
        for _ in range(100):  # the worker's own last steps once the tool returned
            if not default_runner().abandoned():
                break
            pause.wait(0.005)
        self.release.clear()
        self.hang = True


HEDGED_AT_ONCE = ToolPolicy(hedge=Hedge(delay=0.02, budget=1.0, burst=100), retry=None)
"""A hedge 20 ms after the first attempt, with tokens for every call."""


def test_a_call_whose_hedge_won_leaves_no_reference_cycle_sync(
    harness: Harness, cycles: Cycles
) -> None:
    """The first attempt of each call stalls on its thread, the hedge answers; the loser
    is let go after each call and has ended before the next."""
    first = FirstAttemptHangs(harness)

    def check(message: Any, n: int) -> None:
        assert message.content == f"found q{n}"
        assert message.response_metadata["resilience"]["hedge_won"] is True

    _invoke_again(harness, first.tool, HEDGED_AT_ONCE, cycles, check, after=first.let_go, runs=3)


def test_a_call_whose_hedge_won_leaves_no_reference_cycle_async(
    harness: Harness, cycles: Cycles
) -> None:
    """An async tool: the stalled first attempt is cancelled when the hedge answers, from
    sync code too (where its coroutine runs on a loop of ours), and has ended before the
    next call. The cancellation it raised, kept by the frame that drove it
    (`runtime.drive`), held that frame in a cycle (two objects of ours per call)."""
    stall, cancelled = [True], threading.Semaphore(0)

    @tool
    async def search_tail(query: str) -> str:
        """Search, stalling on the first attempt of each call."""
        if stall[0]:
            stall[0] = False
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.release()
                raise
            return "late"
        return f"found {query}"

    def check(message: Any, n: int) -> None:
        assert message.content == f"found q{n}"
        assert message.response_metadata["resilience"]["hedge_won"] is True

    def again() -> None:
        assert cancelled.acquire(timeout=10), "the losing attempt was not cancelled"
        stall[0] = True

    _invoke_again(harness, search_tail, HEDGED_AT_ONCE, cycles, check, after=again, runs=3)


def test_the_check_sees_a_cycle_the_package_makes(cycles: Cycles) -> None:
    """The check itself: a call kept by a closure it keeps is found."""
    from langchain_resilient_tools.core.call import CallRecord

    with cycles:
        record = CallRecord(tool="t", call_id="c")
        holder: list[Any] = [record]
        holder.append(holder)
        del record, holder
    assert cycles.found["CallRecord"] == 1
    assert "list -> list, CallRecord" in cycles.edges
