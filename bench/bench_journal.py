"""Cost of the write journal: ``python -m bench.bench_journal``.

A write tool (``send_email``) wrapped with `ResilientTool.wrap` and a ``store=``, in a
one-node graph with a checkpointer (the journal keeps entries only for calls a run can
resume), called on a fresh thread each time (so that each call is a new write: intent
claimed, tool run, receipt written), with ``journal=True`` against
``journal=False`` on the same store (dedup off: only the journal differs), in
alternating blocks of calls. Stores:
LangGraph's ``InMemoryStore``, a SQLite file (``SqliteStore``), and ``PostgresStore``
on a throwaway local cluster (skipped if PostgreSQL cannot start). Also counts the
journal's store round trips per write and per read (reads: none). Prints a table and
writes ``bench/results/journal.json``.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import ResilientTool, ToolPolicy
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
from langchain_resilient_tools.state.choose import as_backend

from . import _util
from .bench_backends import _postgres


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def get_inbox(to: str) -> str:
    """Read an inbox."""
    return f"inbox of {to}"


class _Counted:
    """A backend that counts the journal's operations on the one it wraps."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.clock, self.ops = backend, backend.clock, 0

    def _count(self, ns: str) -> None:
        self.ops += ns == NS_JOURNAL

    def get(self, ns: str, key: str) -> Any:
        self._count(ns)
        return self.backend.get(ns, key)

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        self._count(ns)
        self.backend.put(ns, key, value, ttl=ttl)

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        self._count(ns)
        return bool(self.backend.claim(ns, key, value, ttl=ttl))

    def delete(self, ns: str, key: str) -> None:
        self._count(ns)
        self.backend.delete(ns, key)


def _caller(fn: Any, store: Any, journal: bool) -> Callable[[int], Any]:
    policy = ToolPolicy(timeout=None, dedup="off", journal=journal)
    tool = ResilientTool.wrap(StructuredTool.from_function(fn), policy=policy, store=store)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile(checkpointer=InMemorySaver())
    run = uuid.uuid4().hex[:6]

    def call(i: int) -> Any:
        tc = {"name": fn.__name__, "args": {"to": "ann"}, "id": "call_0", "type": "tool_call"}
        config = {"configurable": {"thread_id": f"{run}-{i}"}}
        return app.invoke({"messages": [AIMessage("", tool_calls=[tc])]}, config)

    return call


def _round_trips(store: Any, fn: Any) -> float:
    counted = _Counted(as_backend(store))
    call = _caller(fn, counted, True)
    for i in range(20):
        call(i)
    return counted.ops / 20


BLOCK = 10
"""Calls per block: journal-off and journal-on blocks alternate within each round."""


def _interleaved(
    off: Callable[[int], Any], on: Callable[[int], Any], calls: int, rounds: int
) -> tuple[tuple[float, list[float]], tuple[float, list[float]]]:
    """Per-call µs of `off` and `on` (median, per round), their blocks of `BLOCK` calls
    alternating: a machine whose load drifts during the run weighs on both alike."""
    timed: dict[bool, list[float]] = {False: [], True: []}
    i = 0  # a fresh thread per call
    for _ in range(rounds):
        spent = {False: 0.0, True: 0.0}
        for _ in range(max(1, calls // BLOCK)):
            for journal, fn in ((False, off), (True, on)):
                start = time.perf_counter()
                for j in range(i, i + BLOCK):
                    fn(j)
                spent[journal] += time.perf_counter() - start
            i += BLOCK
        for journal in (False, True):
            timed[journal].append(spent[journal] / (max(1, calls // BLOCK) * BLOCK) * 1e6)
    return (
        (statistics.median(timed[False]), timed[False]),
        (statistics.median(timed[True]), timed[True]),
    )


def run(calls: int = 300, rounds: int = 5) -> dict[str, Any]:
    from langgraph.store.sqlite import SqliteStore

    rows: dict[str, Any] = {}
    folder = tempfile.mkdtemp(prefix="lrt-journal-")
    stores: dict[str, Any] = {
        "inmemorystore": InMemoryStore(),
        "sqlite": SqliteStore(
            sqlite3.connect(str(Path(folder) / "store.db"), check_same_thread=False)
        ),
    }
    with _postgres() as pg_store:
        if pg_store is not None:
            stores["postgres"] = pg_store
        for name, store in stores.items():
            off, on = _interleaved(
                _caller(send_email, store, False), _caller(send_email, store, True), calls, rounds
            )
            rows[name] = {
                "write_us_journal_off": round(off[0], 1),
                "write_us_journal_on": round(on[0], 1),
                "added_us_per_write": round(on[0] - off[0], 1),
                "round_trips_per_write": _round_trips(store, send_email),
                "round_trips_per_read": _round_trips(store, get_inbox),
                "per_round_on": [round(x, 1) for x in on[1]],
            }
    return {"calls": calls, "rounds": rounds, "rows": rows}


def table(result: dict[str, Any]) -> str:
    headers = ["store", "write us (off)", "write us (on)", "added us", "trips/write", "trips/read"]
    rows = [
        [name, r["write_us_journal_off"], r["write_us_journal_on"], r["added_us_per_write"],
         r["round_trips_per_write"], r["round_trips_per_read"]]
        for name, r in result["rows"].items()
    ]  # fmt: skip
    return _util.format_table(headers, rows)


def main(quick: bool = False) -> tuple[dict[str, Any], str]:
    result = run(calls=20, rounds=2) if quick else run()
    return result, table(result)


if __name__ == "__main__":
    result, text = main("--quick" in sys.argv)
    print(text)
    path = _util.save_json({"journal": result, "meta": _util.run_metadata()}, _util.RESULTS_DIR / "journal.json")  # fmt: skip
    print(f"written: {path}")
