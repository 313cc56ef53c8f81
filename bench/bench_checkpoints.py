"""Checkpoint bytes of one long thread: `ResilientToolNode` against `ToolNode`.

Run: ``.venv/bin/python -m bench.bench_checkpoints [--quick] [--steps N]``

One thread of ``--steps`` steps (default 100); each step is one AIMessage with three
reads whose results are about 2.5 KB of text (different arguments each step, so
nothing is deduplicated), run through a graph ``START -> tools -> END`` compiled with
a `SqliteSaver` on a file of its own. Variants:

- ``ToolNode``: `ToolNode` in a `MessagesState` graph (the baseline);
- ``ResilientToolNode, MessagesState``: no ``tool_ledger`` in the state;
- ``ResilientToolNode, ResilientToolsState``: the dedup ledger in the state, as
  recommended (it points at the thread's messages instead of copying the results).

Bytes are what the saver stored: the checkpoints, their metadata and the pending
writes (``SUM(LENGTH(...))`` over its tables), and the database file's size. Then the
last variant's thread is resumed in a new graph (a new node on the same saver, as a
restarted process) with a call identical to step 1's: it must be answered from the
ledger, not run. Nothing is timed; the table is printed and the numbers are written to
``bench/results/checkpoints.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from langchain_resilient_tools import ResilientToolNode, ResilientToolsState

from . import _util

RESULT_CHARS = 2500
TARGET = 1.05
"""`ResilientToolNode` with `ResilientToolsState` against `ToolNode`: at most this."""

RUNS: list[int] = [0]


def read_tool() -> BaseTool:
    def read_page(page: int) -> str:
        """Read one page of the manual."""
        RUNS[0] += 1
        line = f"Page {page}: the manual says what it says about section {page}. "
        return (line * (RESULT_CHARS // len(line) + 1))[:RESULT_CHARS]

    return StructuredTool.from_function(read_page)


def _id(prefix: str, *parts: int, size: int = 24) -> str:
    """A stable id as long as a provider's (e.g. ``call_`` and 24 characters)."""
    return prefix + hashlib.sha256(repr(parts).encode()).hexdigest()[:size]


def step_message(step: int) -> AIMessage:
    calls = [
        {"name": "read_page", "args": {"page": step * 3 + i}, "id": _id("call_", step, i)}
        for i in range(3)
    ]
    return AIMessage("", tool_calls=calls, id=_id("run-", step, size=36))


def graph(kind: str, saver: SqliteSaver) -> Any:
    node: Any
    if kind == "toolnode":
        builder: Any = StateGraph(MessagesState)
        node = ToolNode([read_tool()])
    else:
        builder = StateGraph(ResilientToolsState if kind == "ledger" else MessagesState)
        node = ResilientToolNode([read_tool()])
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


def stored_bytes(conn: sqlite3.Connection) -> dict[str, int]:
    """What the saver stored: checkpoints and metadata, pending writes, the whole file."""
    (checkpoints,) = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(checkpoint)) + SUM(LENGTH(metadata)), 0) FROM checkpoints"
    ).fetchone()
    (writes,) = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    return {
        "checkpoints": int(checkpoints),
        "writes": int(writes),
        "total": int(checkpoints) + int(writes),
        "file": int(pages) * int(page_size),
    }


def run_thread(kind: str, steps: int, folder: Path, *, resume: bool = False) -> dict[str, Any]:
    """One thread of `steps` steps under `kind`; with `resume`, step 1's first call
    again afterwards, in a new graph on the same saver."""
    conn = sqlite3.connect(folder / f"{kind}.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    config: Any = {"configurable": {"thread_id": "bench"}}
    app = graph(kind, saver)
    for step in range(steps):
        app.invoke({"messages": [step_message(step)]}, config)
    out: dict[str, Any] = {"bytes": stored_bytes(conn)}
    if resume:
        before = RUNS[0]
        again = AIMessage(
            "", tool_calls=[{"name": "read_page", "args": {"page": 0}, "id": "again"}], id="ai-x"
        )
        state = graph(kind, saver).invoke({"messages": [again]}, config)
        answer = next(
            m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "again"
        )
        record = answer.response_metadata.get("resilience") or {}
        out["reused_after_restart"] = RUNS[0] == before and record.get("served_by") == "dedup"
    conn.close()
    return out


VARIANTS: dict[str, str] = {
    "toolnode": "ToolNode",
    "plain": "ResilientToolNode, MessagesState",
    "ledger": "ResilientToolNode, ResilientToolsState",
}


def run(steps: int = 100) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lrt-bench-") as tmp:
        threads = {
            kind: run_thread(kind, steps, Path(tmp), resume=kind == "ledger") for kind in VARIANTS
        }
    base = threads["toolnode"]["bytes"]
    rows = {}
    for kind, out in threads.items():
        size = out["bytes"]
        rows[kind] = {
            **size,
            "ratio": round(size["total"] / base["total"], 3),
            "file_ratio": round(size["file"] / base["file"], 3),
        }
    ratio = rows["ledger"]["ratio"]
    return {
        "steps": steps,
        "result_chars": RESULT_CHARS,
        "reads_per_step": 3,
        "variants": rows,
        "target": TARGET,
        "target_met": ratio <= TARGET,
        "reused_after_restart": threads["ledger"]["reused_after_restart"],
    }


def table(result: dict[str, Any]) -> str:
    rows = []
    for kind, label in VARIANTS.items():
        row = result["variants"][kind]
        rows.append(
            [
                label,
                f"{row['total'] / 1e6:.1f}",
                f"{row['ratio']:.3f}x",
                f"{row['file'] / 1e6:.1f}",
                f"{row['file_ratio']:.3f}x",
            ]
        )
    text = _util.format_table(["variant", "stored MB", "ratio", "file MB", "file ratio"], rows)
    return (
        f"{result['steps']} steps x {result['reads_per_step']} reads of "
        f"{result['result_chars']} chars, SqliteSaver\n{text}\n"
        f"target <= {result['target']}x: {'met' if result['target_met'] else 'NOT met'}; "
        f"reused after a restart: {result['reused_after_restart']}"
    )


def main(argv: Sequence[str] | None = None, *, quick: bool = False) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 steps instead of 100")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(list(argv or []))
    steps = 20 if (quick or args.quick) else args.steps
    result = {"meta": _util.run_metadata(list(argv or [])), **run(steps)}
    print(table(result))
    path = _util.save_json(result, _util.RESULTS_DIR / "checkpoints.json")
    print(f"\nresults: {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
