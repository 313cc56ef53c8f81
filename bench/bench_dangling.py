"""Cost of answering dangling tool calls: ``python -m bench.bench_dangling``.

`ResilientToolsMiddleware` looks for calls a stopped run left unanswered before every
model call (``before_model``). Measured here, with a `create_agent` agent:

- **check**: the look when nothing dangles (every run pays it), per model call, for
  threads of 40, 400 and 4,000 messages, beside the time of a whole agent turn on
  ``InMemorySaver`` (the cheapest checkpointer) for scale;
- **checkpoints per run**: with the look in ``before_model`` (no node added) against the
  same look in a ``before_agent`` hook (a node of its own: one more checkpoint per run);
- **repair**: one repair on a SQLite checkpointer after a run stopped before its tools,
  on threads of 10 and 50 earlier turns: the whole model step that answers it, and the
  part spent reading the thread's checkpoints back (`pipeline.journal.made`).

Prints a table and writes ``bench/results/dangling.json``.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
import timeit
from functools import partial
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_resilient_tools import ResilientToolsMiddleware
from langchain_resilient_tools.adapters import dangling as answering
from langchain_resilient_tools.adapters import middleware as mw
from langchain_resilient_tools.pipeline.journal import dangling, made
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call

from . import _util


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _turn(i: int) -> list[Any]:
    call = tool_call("send_email", {"to": "ann"}, id=f"call_{i}")
    return [
        HumanMessage("go"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("sent to ann", tool_call_id=f"call_{i}"),
        AIMessage("done"),
    ]


def _script(turns: int) -> list[AIMessage]:
    return [AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c")]), AIMessage("done")] * turns  # fmt: skip


class _BeforeAgent(ResilientToolsMiddleware):
    """The same look as a ``before_agent`` hook (a node of its own)."""

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return answering.repair_dangling(self, state)


def _checkpoints_per_run(cls: type[AgentMiddleware]) -> int:
    saver = InMemorySaver()
    model = ScriptedChatModel(script=_script(1), per_turn=True)
    app = create_agent(model, tools=[send_email], middleware=[cls()], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("go")]}, config)
    return len(list(saver.list(config)))


def _turn_ms(rounds: int) -> float:
    model = ScriptedChatModel(script=_script(1), per_turn=True)
    app = create_agent(
        model, tools=[send_email], middleware=[ResilientToolsMiddleware()],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": f"t{i}"}})
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _repair_ms(turns: int, folder: Path) -> dict[str, float]:
    conn = sqlite3.connect(folder / f"thread-{turns}.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    config: Any = {"configurable": {"thread_id": "t"}}
    model = ScriptedChatModel(script=_script(turns + 1))
    app = create_agent(
        model, tools=[send_email], middleware=[ResilientToolsMiddleware()],
        checkpointer=saver, interrupt_before=["tools"],
    )  # fmt: skip
    for _ in range(turns):
        app.invoke({"messages": [HumanMessage("go")]}, config)
        app.invoke(None, config)  # the tools, then the model's "done"
    app.invoke({"messages": [HumanMessage("go")]}, config)  # stops before its tools
    walked: list[float] = []
    where_made = dangling.where_made

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return where_made(*args, **kwargs)
        finally:
            walked.append(time.perf_counter() - start)

    spent: list[float] = []
    repair = mw.repair_dangling

    def step(self: Any, state: Any) -> Any:
        start = time.perf_counter()
        try:
            return repair(self, state)
        finally:
            spent.append(time.perf_counter() - start)

    again = create_agent(
        ScriptedChatModel(script=[AIMessage("ok")]), tools=[send_email],
        middleware=[ResilientToolsMiddleware()], checkpointer=saver,
    )  # fmt: skip
    dangling.where_made, mw.repair_dangling = timed, step  # type: ignore[attr-defined]
    try:
        state = again.invoke({"messages": [HumanMessage("and?")]}, config)
    finally:
        dangling.where_made, mw.repair_dangling = where_made, repair  # type: ignore[attr-defined]
    conn.close()
    return {
        "messages": len(state["messages"]),
        "repair_ms": round(max(spent) * 1e3, 2),
        "checkpoint_walk_ms": round(sum(walked) * 1e3, 2),
    }


def run(
    rounds: int = 20, sizes: tuple[int, ...] = (40, 400, 4000), turns: tuple[int, ...] = (10, 50)
) -> dict[str, Any]:
    check = {}
    for n in sizes:
        messages = [m for i in range(n // 4) for m in _turn(i)]
        reps = max(5, 20000 // n)
        look = partial(dangling.dangling, messages)
        best = min(timeit.repeat(look, number=reps, repeat=5))
        check[n] = round(best / reps * 1e6, 1)
    folder = Path(tempfile.mkdtemp(prefix="lrt-dangling-"))
    return {
        "meta": _util.run_metadata(),
        "check_us_per_model_call": check,
        "agent_turn_ms_inmemory": round(_turn_ms(rounds), 2),
        "checkpoints_per_run": {
            "before_model": _checkpoints_per_run(ResilientToolsMiddleware),
            "before_agent": _checkpoints_per_run(_BeforeAgent),
        },
        "repair_sqlite": {n: _repair_ms(n, folder) for n in turns},
        "window": made.WINDOW,
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        [f"check, {n} messages", f"{us} us per model call"]
        for n, us in result["check_us_per_model_call"].items()
    ]
    rows.append(["agent turn (InMemorySaver)", f"{result['agent_turn_ms_inmemory']} ms"])
    cps = result["checkpoints_per_run"]
    rows.append(
        ["checkpoints per run", f"{cps['before_model']} (before_agent: {cps['before_agent']})"]
    )
    for turns, r in result["repair_sqlite"].items():
        rows.append(
            [
                f"repair, {turns} turns ({r['messages']} messages)",
                f"{r['repair_ms']} ms, of which checkpoints read {r['checkpoint_walk_ms']} ms",
            ]
        )
    return _util.format_table(["dangling tool calls", "cost"], rows)


def main() -> tuple[dict[str, Any], str]:
    result = run()
    _util.save_json(result, _util.RESULTS_DIR / "dangling.json")
    return result, table(result)


if __name__ == "__main__":
    print(main()[1])
