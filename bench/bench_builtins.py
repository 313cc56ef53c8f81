"""Which do I use? LangChain's own tool layers beside ours, over the same faults.

``python -m bench.bench_builtins [--quick]``

Each scenario is one AIMessage of tool calls against a fake service that misbehaves in
one way (a hang, a flaky read, a write whose connection resets after sending, a secret
in an exception's text, a call the model could not format, an unknown tool, identical
calls, a misspelt argument). Every stack runs it once, as a one-node `StateGraph`
invoked asynchronously (a node ``timeout=`` is async-only), and the invariants the
reliability suite fuzzes (tests/reliability) are checked on the final state:

- ``answered_once``: every call id of the AIMessage (valid, invalid, unknown) has
  exactly one `ToolMessage`;
- ``no_raise``: the run returned;
- ``no_leak``: no answer carries the secret, a traceback or a source path;
- ``envelope``: every error answer is machine-readable: JSON naming the error type;
- ``unknown_outcome``: a write that failed after it may have taken effect (a reset after
  sending, a hang) is answered as such, not as a plain failure the model would retry;
- ``time_bound``: the run ended within `BOUND_S` (the stacks' timeouts plus a margin);
- ``writes_once``: no write call was sent more than once;
- ``twins``: identical calls in the message ran once;
- ``siblings``: a healthy call beside a failing one kept its real result.

An invariant that does not apply to a scenario is ``None``. The stacks:

- ``ToolNode``: LangGraph's `ToolNode` with its defaults (the baseline);
- ``native``: the strongest stack LangChain's pieces give: `ToolNode` +
  `ToolErrorMiddleware` (answers every exception with JSON naming its type, never its
  text) + `ToolRetryMiddleware` inside it as its docs advise (``on_failure="error"``),
  limited to the read tools and to connection errors, + the node's ``timeout=`` with an
  ``error_handler=`` that answers every call of the step when it fires;
- ``native_defaults``: the same with `ToolRetryMiddleware`'s default reach (every tool,
  every exception);
- ``ours``: `ResilientToolNode` with a short per-attempt timeout;
- ``ours+node_timeout``: the same inside a node ``timeout=`` longer than our call
  deadline (the safe stack: the node's timeout is only a backstop).

Counts, not timings, are the result (``seconds`` is kept for the time bound). Writes
``bench/results/builtins.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import ToolErrorMiddleware, ToolRetryMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import NodeError
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsState,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.testing import invalid_call, tool_call

from . import _util

ATTEMPT_S = 0.2
"""Our per-attempt timeout; our call deadline is then 2 x 0.2 + 1 = 1.4 s (the default)."""
NODE_TIMEOUT_S = 1.4
"""The native stacks' node ``timeout=`` (the same budget as our call deadline)."""
BACKSTOP_S = 3.0
"""``ours+node_timeout``: the node's timeout, above our call deadline."""
HANG_S = 3.0
"""How long a hung tool takes when nothing cancels it."""
BOUND_S = 2.0
"""The time bound of one run: the 1.4 s budget plus a margin for a loaded machine."""
SECRET = "hunter2"
STACKS = ("ToolNode", "native", "native_defaults", "ours", "ours+node_timeout")
INVARIANTS = (
    "answered_once", "no_raise", "no_leak", "envelope", "unknown_outcome", "time_bound",
    "writes_once", "twins", "siblings",
)  # fmt: skip
WRITES = frozenset({"create_order", "create_slow"})
READS = ("get_price", "get_stock", "get_quote", "get_user")


class Service:
    """The fake services behind the tools: each execution is counted."""

    def __init__(self, *, reset_after_sending: bool = False) -> None:
        self.runs: Counter[str] = Counter()
        self.reset_after_sending = reset_after_sending

    def tools(self) -> list[BaseTool]:
        async def get_price(item: str) -> str:
            """The price of an item."""
            self.runs["get_price"] += 1
            return f"{item}: 3 EUR"

        async def get_stock(item: str) -> str:
            """How many of an item are in stock (this service hangs)."""
            self.runs["get_stock"] += 1
            await asyncio.sleep(HANG_S)
            return "late"

        async def get_quote(item: str) -> str:
            """A quote for an item (fails once, then answers)."""
            self.runs["get_quote"] += 1
            if self.runs["get_quote"] == 1:
                raise ConnectionError("quote service unavailable")
            return f"quote for {item}"

        async def get_user(item: str) -> str:
            """A user record (its database error carries a secret)."""
            self.runs["get_user"] += 1
            raise ValueError(f"lookup of {item} failed: postgres://app:{SECRET}@db/users")

        async def create_order(item: str) -> str:
            """Create an order (a write)."""
            self.runs["create_order"] += 1
            if self.reset_after_sending:
                raise ConnectionResetError("connection reset by peer")
            return f"order for {item}"

        async def create_slow(item: str) -> str:
            """Create an order on a service that hangs (a write)."""
            self.runs["create_slow"] += 1
            await asyncio.sleep(HANG_S)
            return "late"

        fns = (get_price, get_stock, get_quote, get_user, create_order, create_slow)
        return [StructuredTool.from_function(coroutine=fn) for fn in fns]


@dataclass(frozen=True)
class Scenario:
    name: str
    calls: tuple[dict[str, Any], ...]
    invalid: tuple[dict[str, Any], ...] = ()
    reset_after_sending: bool = False
    siblings: tuple[str, ...] = ()
    """Ids of healthy calls whose real result must survive their neighbour's failure."""
    twins: bool = False
    """The message repeats a call: identical calls must run once."""
    uncertain: tuple[str, ...] = ()
    """Ids of write calls that may have taken effect and failed: an unknown outcome."""
    doc: str = ""


def _c(name: str, id: str, **args: Any) -> dict[str, Any]:
    return tool_call(name, args or {"item": "tea"}, id=id)


SCENARIOS = (
    Scenario("hang_read", (_c("get_stock", "h"), _c("get_price", "ok")), siblings=("ok",),
             doc="a read that hangs, beside a healthy read"),
    Scenario("hang_write", (_c("create_slow", "h"), _c("get_price", "ok")), siblings=("ok",),
             uncertain=("h",), doc="a write that hangs, beside a healthy read"),
    Scenario("flaky_read", (_c("get_quote", "q"),), doc="a read that fails once, then answers"),
    Scenario("write_reset", (_c("create_order", "w"),), reset_after_sending=True,
             uncertain=("w",), doc="a write whose connection resets after sending"),
    Scenario("secret_in_error", (_c("get_user", "u"), _c("get_price", "ok")), siblings=("ok",),
             doc="an exception whose text carries a password"),
    Scenario("malformed_call", (_c("get_price", "ok"),),
             invalid=(invalid_call("get_price", '{"item": "te', id="bad"),), siblings=("ok",),
             doc="arguments the model could not format (truncated JSON)"),
    Scenario("unknown_tool", (_c("get_weather", "x"), _c("get_price", "ok")), siblings=("ok",),
             doc="a tool that does not exist"),
    Scenario("bad_arguments", (_c("get_price", "b", itme="tea"), _c("get_price", "ok", item="milk")),
             siblings=("ok",), doc="a misspelt argument name"),
    Scenario("duplicate_reads", (_c("get_price", "a"), _c("get_price", "b")), twins=True,
             doc="the same read twice in one message"),
    Scenario("duplicate_writes", (_c("create_order", "a"), _c("create_order", "b")), twins=True,
             doc="the same write twice in one message"),
)  # fmt: skip


# -- the stacks ---------------------------------------------------------------------------


def _on_error(exc: Exception, request: Any) -> str:
    """What a careful user returns: the error's type, never its text."""
    return json.dumps({"error": type(exc).__name__, "tool": request.tool_call["name"]})


def _answer_all(state: dict[str, Any], error: NodeError) -> dict[str, Any]:
    """The native stacks' node ``error_handler=``: answer every call left unanswered."""
    ai = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
    done = {m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)}
    body = {"error": type(error.error).__name__, "node": error.node}
    return {
        "messages": [
            ToolMessage(json.dumps(body), tool_call_id=tc["id"], name=tc["name"], status="error")
            for tc in ai.tool_calls
            if tc["id"] not in done
        ]
    }


def _chained(outer: Any, inner: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``outer`` around ``inner``, as `create_agent` chains ``middleware=[outer, inner]``."""

    def wrap(request: Any, execute: Any) -> Any:
        return outer.wrap_tool_call(request, lambda r: inner.wrap_tool_call(r, execute))

    async def awrap(request: Any, execute: Any) -> Any:
        async def call_inner(r: Any) -> Any:
            return await inner.awrap_tool_call(r, execute)

        return await outer.awrap_tool_call(request, call_inner)

    return wrap, awrap


def build(stack: str, tools: Sequence[BaseTool]) -> Any:
    """The compiled one-node graph of `stack`."""
    node_kw: dict[str, Any] = {}
    if stack == "ToolNode":
        node: Any = ToolNode(list(tools))
    elif stack.startswith("native"):
        if stack == "native":
            retry = ToolRetryMiddleware(
                max_retries=2, tools=list(READS), retry_on=(ConnectionError, TimeoutError),
                on_failure="error", initial_delay=0.05, jitter=False,
            )  # fmt: skip
        else:
            retry = ToolRetryMiddleware(on_failure="error", initial_delay=0.05, jitter=False)
        wrap, awrap = _chained(ToolErrorMiddleware(_on_error), retry)
        node = ToolNode(list(tools), wrap_tool_call=wrap, awrap_tool_call=awrap)
        node_kw = {"timeout": NODE_TIMEOUT_S, "error_handler": _answer_all}
    else:
        policy = ToolPolicy(timeout=ATTEMPT_S, retry=RetryPolicy(initial_delay=0.05))
        node = ResilientToolNode(list(tools), policy=policy)
        if stack == "ours+node_timeout":
            node_kw = {"timeout": BACKSTOP_S}
    graph = StateGraph(ResilientToolsState)
    graph.add_node("tools", node, **node_kw)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


# -- one run and its invariants -----------------------------------------------------------


@dataclass
class Cell:
    scenario: str
    stack: str
    invariants: dict[str, bool | None] = field(default_factory=dict)
    executions: dict[str, int] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    """Per call id: ``success``, or the error type an error answer names (``text`` when
    it names none)."""
    seconds: float = 0.0
    raised: str | None = None


def _error_type(message: ToolMessage) -> str:
    if message.status != "error":
        return "success"
    try:
        body = json.loads(str(message.content))
    except ValueError:
        return "text"
    return str(body.get("error")) if isinstance(body, dict) and body.get("error") else "text"


_SOURCE = re.compile(r"Traceback|File \"|\.py\b")


def _leaks(text: str) -> bool:
    """The secret, a traceback or a source path in what the model reads."""
    return SECRET in text or _SOURCE.search(text) is not None


def _says_unknown(message: ToolMessage | None) -> bool:
    """An error answer that tells the model the write may have happened."""
    if message is None or message.status != "error":
        return False
    text = str(message.content).lower()
    return "unknown_outcome" in text or "may have" in text


async def run_cell(scenario: Scenario, stack: str) -> Cell:
    service = Service(reset_after_sending=scenario.reset_after_sending)
    graph = build(stack, service.tools())
    ai = AIMessage("", tool_calls=list(scenario.calls), invalid_tool_calls=list(scenario.invalid))
    cell = Cell(scenario.name, stack)
    state: dict[str, Any] = {"messages": []}
    start = time.monotonic()
    try:
        state = await graph.ainvoke({"messages": [ai]})
    except Exception as exc:  # a run that raises is a result here
        cell.raised = type(exc).__name__
    cell.seconds = round(time.monotonic() - start, 3)
    cell.executions = dict(sorted(service.runs.items()))
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    cell.answers = {m.tool_call_id: _error_type(m) for m in answers}
    cell.invariants = _check(scenario, cell, answers, service.runs)
    return cell


def _check(
    scenario: Scenario, cell: Cell, answers: list[ToolMessage], runs: Counter[str]
) -> dict[str, bool | None]:
    asked = [c["id"] for c in scenario.calls] + [c["id"] for c in scenario.invalid]
    counts = Counter(m.tool_call_id for m in answers)
    by_id = {m.tool_call_id: m for m in answers}
    errors = [m for m in answers if m.status == "error"]
    write_calls = Counter(c["name"] for c in scenario.calls if c["name"] in WRITES)
    siblings = [by_id.get(i) for i in scenario.siblings]
    expected = {c["id"]: f"{c['args'].get('item')}: 3 EUR" for c in scenario.calls}
    return {
        "answered_once": cell.raised is None and all(counts[i] == 1 for i in asked)
        and set(counts) <= set(asked),
        "no_raise": cell.raised is None,
        "no_leak": not any(_leaks(str(m.content)) for m in answers),
        "envelope": all(_error_type(m) != "text" for m in errors) if errors else None,
        "unknown_outcome": all(_says_unknown(by_id.get(i)) for i in scenario.uncertain)
        if scenario.uncertain else None,
        "time_bound": cell.seconds <= BOUND_S,
        "writes_once": all(runs[n] <= k for n, k in write_calls.items()) if write_calls else None,
        "twins": all(v <= 1 for v in runs.values()) if scenario.twins else None,
        "siblings": all(
            m is not None and m.status == "success" and str(m.content).endswith(expected[i])
            for i, m in zip(scenario.siblings, siblings, strict=True)
        ) if scenario.siblings else None,
    }  # fmt: skip


# -- the whole run ------------------------------------------------------------------------


async def _run_all(scenarios: Sequence[Scenario], stacks: Sequence[str]) -> list[Cell]:
    cells = []
    for scenario in scenarios:
        for stack in stacks:
            cells.append(await run_cell(scenario, stack))
    return cells


def run(scenarios: Sequence[str] | None = None, stacks: Sequence[str] = STACKS) -> dict[str, Any]:
    chosen = [s for s in SCENARIOS if scenarios is None or s.name in scenarios]
    cells = asyncio.run(_run_all(chosen, stacks))
    summary: dict[str, dict[str, Any]] = {}
    for stack in stacks:
        mine = [c for c in cells if c.stack == stack]
        failed = Counter(k for c in mine for k, v in c.invariants.items() if v is False)
        held = sum(1 for c in mine for v in c.invariants.values() if v is True)
        summary[stack] = {
            "checks_held": held,
            "checks_failed": sum(failed.values()),
            "scenarios_all_held": sum(1 for c in mine if False not in c.invariants.values()),
            "failed_by_invariant": dict(sorted(failed.items())),
            "executions": sum(sum(c.executions.values()) for c in mine),
        }
    return {
        "stacks": list(stacks),
        "invariants": list(INVARIANTS),
        "scenarios": [{"name": s.name, "doc": s.doc} for s in chosen],
        "settings": {
            "attempt_timeout_s": ATTEMPT_S,
            "node_timeout_s": NODE_TIMEOUT_S,
            "backstop_timeout_s": BACKSTOP_S,
            "hang_s": HANG_S,
            "bound_s": BOUND_S,
        },
        "cells": [c.__dict__ for c in cells],
        "summary": summary,
    }


def _mark(cell: dict[str, Any]) -> str:
    failed = [k for k, v in cell["invariants"].items() if v is False]
    return "ok" if not failed else "✗ " + ", ".join(failed)


def markdown(result: dict[str, Any]) -> str:
    """Scenario rows, stack columns: ``ok``, or the invariants that failed."""
    stacks = result["stacks"]
    cells = {(c["scenario"], c["stack"]): c for c in result["cells"]}
    lines = [
        "| scenario | " + " | ".join(stacks) + " |",
        "|---|" + "---|" * len(stacks),
    ]
    for s in result["scenarios"]:
        row = [_mark(cells[(s["name"], st)]) for st in stacks]
        lines.append(f"| {s['name']} | " + " | ".join(row) + " |")
    held = [
        f"{result['summary'][st]['scenarios_all_held']}/{len(result['scenarios'])}" for st in stacks
    ]
    lines.append("| **scenarios with every invariant held** | " + " | ".join(held) + " |")
    return "\n".join(lines)


def table(result: dict[str, Any]) -> str:
    stacks = result["stacks"]
    cells = {(c["scenario"], c["stack"]): c for c in result["cells"]}
    rows = [
        [s["name"], *(_mark(cells[(s["name"], st)]) for st in stacks)] for s in result["scenarios"]
    ]
    executions = [
        ["executions", *(str(result["summary"][st]["executions"]) for st in stacks)],
        ["checks failed", *(str(result["summary"][st]["checks_failed"]) for st in stacks)],
    ]
    return _util.format_table(["scenario", *stacks], rows + executions)


def main(quick: bool = False) -> tuple[dict[str, Any], str]:
    picked = ["write_reset", "malformed_call", "duplicate_writes"] if quick else None
    result = run(picked)
    return result, table(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_builtins", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result, text = main(args.quick)
    print(text)
    if not args.quick:
        path = _util.save_json({"builtins": result, "meta": _util.run_metadata()}, _util.RESULTS_DIR / "builtins.json")  # fmt: skip
        print(f"written: {path}")
        print(markdown(result))
