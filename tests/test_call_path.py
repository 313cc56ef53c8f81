"""One call's path through the stages: each stage entered once on the way in, and left
once on the way out (issue 34, "the house").

The path is read off the interpreter's own profile events (`sys.setprofile`): at every
call and return of a Python function inside `Pipeline.run`/`Pipeline.arun`, the
innermost stage on the stack is noted (a stage is its home: its package, e.g.
``pipeline.dedup``, or its module). With consecutive repeats folded, a healthy call's
path must be the stages in `STAGES` order, then some of them in reverse order (a stage
whose async driver hands the call on without a coroutine of its own is not on the way
out), and nothing else: a stage that calls into another stage's module, or that comes
back to itself after handing the call on (other than on the way out), breaks it.

Every adapter, sync and async; the default policy and one that turns most stages on.
"""

from __future__ import annotations

import asyncio
import dis
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, Self

import pytest
from langchain_core.tools import tool

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    Limits,
    ResultChecks,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.pipeline.driver import STAGES, Pipeline

from .conftest import Harness

PKG = Path(sys.modules["langchain_resilient_tools"].__file__ or "").parent


def _homes() -> dict[str, str]:
    """Each stage's home (a file-path prefix) by the stage's name, in `STAGES` order."""
    homes: dict[str, str] = {}
    for cls in STAGES:
        path = Path(sys.modules[cls.__module__].__file__ or "")
        home = path.parent if path.parent.name != "pipeline" else path.with_suffix("")
        homes[cls.name] = str(home)
    return homes


HOMES = _homes()
ORDER = list(HOMES)


def _home_of(filename: str) -> str | None:
    for name, home in HOMES.items():
        if filename == home + ".py" or filename.startswith(home + "/"):
            return name
    return None


_DRIVERS = {Pipeline.run.__code__, Pipeline.arun.__code__}
_SUSPENDING = {"YIELD_VALUE", "RESUME"}
"""The instruction a coroutine's frame stands at when a ``return`` event only suspends
it (3.11-3.12: ``YIELD_VALUE``; 3.13: ``RESUME``)."""
_RESUMABLE = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _suspended(frame: FrameType) -> bool:
    return dis.opname[frame.f_code.co_code[frame.f_lasti]] in _SUSPENDING


class Profiling:
    """Its `profile` sees every call and return on every thread while it is entered
    (`sys.setprofile`, `threading.setprofile`)."""

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


class PathRecorder(Profiling):
    """The innermost stage at every profile event inside a driver run, per thread."""

    def __init__(self) -> None:
        self.paths: dict[int, list[str]] = {}
        self._homes: dict[Any, str | None] = {}
        self._started: set[FrameType] = set()
        """Coroutine frames that have begun (a later ``call`` event only resumes one)."""

    def _innermost(self, frame: FrameType | None) -> tuple[str | None, bool]:
        """(the innermost stage on `frame`'s stack, whether a driver run is on it)."""
        found: str | None = None
        while frame is not None:
            code = frame.f_code
            if code in _DRIVERS:
                return found, True
            if found is None:
                home = self._homes.get(code)
                if home is None and code not in self._homes:
                    home = self._homes[code] = _home_of(code.co_filename)
                found = home
            frame = frame.f_back
        return found, False

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        if frame.f_code.co_flags & _RESUMABLE:  # a coroutine: its first start, its end
            if event == "call":
                if frame in self._started:
                    return  # resumed after an await: no stage is entered again
                self._started.add(frame)
            elif _suspended(frame):
                return  # suspended at an await: no stage is left
        elif event == "return" and inspect.isawaitable(arg):
            return  # it handed back what its caller now awaits: still on the way in
        home, in_run = self._innermost(frame if event == "call" else frame.f_back)
        if not in_run or home is None:
            return
        path = self.paths.setdefault(threading.get_ident(), [])
        if not path or path[-1] != home:
            path.append(home)


def check_path(path: list[str], applies: set[str]) -> None:
    """`path` is: every stage of `applies`, in `STAGES` order, then some of them in
    reverse order (the way out), nothing else."""
    assert path, "no stage ran"
    index = [ORDER.index(name) for name in path]
    turn = index.index(max(index))  # the innermost stage: the attempt
    ins, outs = index[: turn + 1], index[turn + 1 :]
    assert ins == sorted(set(ins)), f"a stage entered twice or out of order: {path}"
    assert outs == sorted(set(outs), reverse=True), f"a stage left twice or out of order: {path}"
    assert set(outs) <= set(ins), f"a stage left that was never entered: {path}"
    assert {ORDER[i] for i in ins} == applies, (
        f"the stages entered {[ORDER[i] for i in ins]} are not those that apply {sorted(applies)}"
    )


@tool
def search_docs(query: str) -> str:
    """Search the docs."""
    return f"found {query}"


def _applies(harness: Harness, policy: ToolPolicy | None) -> set[str]:
    """The stages the adapter's pipeline keeps for ``search_docs`` (its plan)."""
    pipeline = _pipeline(harness)
    resolved = pipeline.resolver.resolve("search_docs", search_docs)
    return {s.name for s in pipeline.stages if s.applies(resolved)}


def _pipeline(harness: Harness) -> Pipeline:
    adapter = harness.adapters[-1]
    pipeline = getattr(adapter, "pipeline", None) or adapter._pipeline
    assert isinstance(pipeline, Pipeline)
    return pipeline


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
}


@pytest.fixture
def recorded() -> Iterator[PathRecorder]:
    yield PathRecorder()


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_a_healthy_call_enters_and_leaves_each_stage_once(
    harness: Harness, policy_name: str, recorded: PathRecorder
) -> None:
    policy = POLICIES[policy_name]()
    call = {"name": "search_docs", "args": {"query": "q"}, "id": "c1", "type": "tool_call"}
    harness.run([search_docs], [call], policy=policy)  # warm: plans made, schemas read
    with recorded:
        result = harness.run([search_docs], [dict(call, id="c2")], policy=policy)
    assert result["c2"].content.startswith("found")
    runs = [p for p in recorded.paths.values() if p]
    assert len(runs) == 1, recorded.paths  # one call, run on one thread
    check_path(runs[0], _applies(harness, policy))


def test_the_check_fails_on_a_stage_visited_twice() -> None:
    """The rule itself: a path that comes back to a stage it left, or enters one out of
    order, or misses one that applies, is refused."""
    good = ["repair", "admit", "validate", "dedup", "attempt", "dedup"]
    check_path(good, {"repair", "admit", "validate", "dedup", "attempt"})
    for bad, applies in [
        (["repair", "dedup", "repair", "attempt"], {"repair", "dedup", "attempt"}),
        (["dedup", "breaker", "dedup", "attempt", "dedup"], {"dedup", "breaker", "attempt"}),
        (["repair", "attempt", "dedup", "repair", "dedup"], {"repair", "dedup", "attempt"}),
        (["repair", "attempt"], {"repair", "dedup", "attempt"}),
    ]:
        with pytest.raises(AssertionError):
            check_path(bad, applies)


class ModulesEntered(Profiling):
    """The package's modules whose functions ran, on every thread."""

    def __init__(self) -> None:
        self.files: set[str] = set()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(str(PKG)):
            self.files.add(frame.f_code.co_filename[len(str(PKG)) + 1 :])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_that_repeats_nothing_enters_one_dedup_module(mode: str) -> None:
    """Issue 44: a call alone in its step, in a graph whose state keeps no ledger and
    with no thread, repeats nothing: dedup decides that in its stage module and enters
    no other (its twins, ledgers, logic and graph-state modules are for calls that may
    repeat; a thread or a ``tool_ledger`` in the state records the call there)."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from langchain_resilient_tools import ResilientToolNode

    builder = StateGraph(MessagesState)
    builder.add_node("tools", ResilientToolNode([search_docs]))
    builder.add_edge(START, "tools")
    graph = builder.compile()

    def run(call_id: str) -> Any:
        tc = {"name": "search_docs", "args": {"query": "q"}, "id": call_id, "type": "tool_call"}
        payload = {"messages": [AIMessage("", tool_calls=[tc])]}
        if mode == "sync":
            return graph.invoke(payload)
        return asyncio.run(graph.ainvoke(payload))

    run("c1")  # warm: plans made, schemas read
    with ModulesEntered() as entered:
        state = run("c2")
    assert state["messages"][-1].content == "found q"
    dedup = sorted(f for f in entered.files if f.startswith("pipeline/dedup/"))
    assert dedup == ["pipeline/dedup/stage.py"], dedup


def test_identical_calls_still_enter_the_twins_module(harness: Harness) -> None:
    """The other side of the shortcut: a step that calls one tool twice looks at its
    arguments (`pipeline.dedup.twins`), and identical calls run once."""
    if harness.adapter == "tool":
        pytest.skip("a wrapped tool cannot see its step's message")
    calls = [
        {"name": "search_docs", "args": {"query": "q"}, "id": f"t{i}", "type": "tool_call"}
        for i in range(2)
    ]
    with ModulesEntered() as entered:
        result = harness.run([search_docs], calls)
    assert all(str(r.content).endswith("found q") for r in result.messages.values())
    assert "pipeline/dedup/twins.py" in entered.files
