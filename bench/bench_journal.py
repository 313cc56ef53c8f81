"""Cost of the write journal against the store's own cost: ``python -m bench.bench_journal``.

A journaled write costs its store two operations: the intent put before the tool runs,
the receipt after. For each store, one run times four arms, one iteration of each in
turn (the order rotating from one iteration to the next), so that a machine whose load
drifts weighs on all of them alike:

- ``on``: a write (``send_email``) through `ResilientTool.wrap` with ``store=``, the
  journal on (dedup off: only the journal differs between the arms);
- ``off``: the same write with ``journal=False``;
- ``raw``: the same write with ``journal=False`` whose tool itself makes the store's own
  two operations where the journal makes them: its ``put`` of the journal's intent
  before sending, of its receipt after, through the store's API, timed there. Same
  shapes as the journal's: a namespace of two labels, a new key of the journal's form
  and length per call (tool, idempotency key, step digest), and as values the entries
  a real write journals (captured from one), as a `StoreBackend` hands them to a store
  (``{"exp": ..., "j": entry}``: a journal entry is a plain JSON record the store
  serializes itself). The journal's claim of the intent is the put of an
  insert-if-absent: one statement on SQLite and PostgreSQL; a ``BaseStore`` has no
  such operation, so on ``InMemoryStore`` it is a get then a put, and that get counts
  as the journal's own added time, not as raw (the journal reads and writes LangGraph's
  own ``InMemoryStore`` in place, `state.inmemory`: raw stays the store's two puts
  through its API, as a user's code makes them);
- ``bare``: those two puts alone, back to back.

The tool is invoked with the config a graph task gives its tools (a thread, the graph's
checkpointer, the task's checkpoint namespace and step): the journal keeps entries only
for a call a run can resume, and a graph around it would add milliseconds of its own
(its checkpoint) that drown the microseconds compared here. Each call is a new write (a
new tool call id): intent, tool, receipt.

Per store, medians over the iterations of paired differences: ``added_us`` is what the
journal adds (``on - off``), ``raw_us`` what the store's own two puts took in the same
places (timed around them), ``ratio`` their quotient (the target: at most `TARGET`), with
the ratio of each of `ROUNDS` consecutive parts of the run (how stable it is).
``beyond_raw_us`` (``added_us - raw_us``; the table's "beyond raw µs") is what the
journal adds beyond the store's own two puts, in µs: its own work, which the target
allows to be a fifth of raw, and which stays about the same from one store to the next.
``bare_us`` and ``ratio_to_bare`` compare with the two puts alone, back to back: on a
quiet machine about the same as ``raw_us``, but on a loaded one a store round trip made
right after the CPU work of a call waits longer for the CPU to come back than one made
by a loop that does nothing else; the ``raw`` puts, made in the journal's places, wait
as long as its operations do.

Stores: LangGraph's ``InMemoryStore``; ``SqliteStore`` on a file in WAL mode (as
``SqliteSaver`` sets it; the connection at SQLite's default ``synchronous=FULL``);
``PostgresStore`` on a throwaway cluster (`tests.pg`) with ``fsync`` on, as a server
runs, and on another with it off, as the tests run it (skipped if PostgreSQL cannot
start). Also counts the journal's store operations per write and per read. Prints a
table and writes ``bench/results/journal.json`` (not with ``--quick`` or ``--only
STORE ...``); a full run also counts the ``InMemoryStore`` arms' instructions
(`bench.journal_instructions`, under valgrind: stable where wall time is not).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import ResilientTool, ToolPolicy
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL, entry_key
from langchain_resilient_tools.state.backend import encode, put_unsynced
from langchain_resilient_tools.state.choose import as_backend

from . import _util

TARGET = 1.2
"""The journal's added time per write, at most this times the store's raw cost."""
ROUNDS = 5
"""Slices of each store's run whose ratios are reported apart."""
ITERATIONS = {"inmemorystore": 3000, "sqlite": 300, "postgres": 300, "postgres_fsync_off": 1000}
"""Iterations per store (one call of each arm each)."""
ARMS = ("on", "off", "raw", "bare")


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def get_inbox(to: str) -> str:
    """Read an inbox."""
    return f"inbox of {to}"


class _Counted:
    """A backend that counts (and keeps) the journal's operations on the one it wraps."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.clock = backend, backend.clock
        self.reads = self.writes = 0
        self.written: list[Any] = []

    def _count(self, ns: str, write: bool, value: Any = None) -> None:
        if ns == NS_JOURNAL:
            self.writes += write
            self.reads += not write
            if value is not None:
                self.written.append(value)

    def get(self, ns: str, key: str) -> Any:
        self._count(ns, False)
        return self.backend.get(ns, key)

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        self._count(ns, True, value)
        self.backend.put(ns, key, value, ttl=ttl)

    def put_unsynced(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        self._count(ns, True, value)
        put_unsynced(self.backend, ns, key, value, ttl=ttl)

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        self._count(ns, True, value)
        return bool(self.backend.claim(ns, key, value, ttl=ttl))

    def delete(self, ns: str, key: str) -> None:
        self._count(ns, True)
        self.backend.delete(ns, key)


SAVER = InMemorySaver()
"""The checkpointer the calls' config names (the journal keeps entries only for calls
of a checkpointed graph; where it keeps them is the store's choice here)."""


def _caller(fn: Any, store: Any, journal: bool) -> Callable[[int], Any]:
    """Calls of `fn` (named ``send_email`` or ``get_inbox``: a write or a read) wrapped
    with `store=`, each a new tool call in a graph task."""
    policy = ToolPolicy(timeout=None, dedup="off", journal=journal)
    name = "get_inbox" if fn is get_inbox else "send_email"
    tool = ResilientTool.wrap(
        StructuredTool.from_function(fn, name=name), policy=policy, store=store
    )
    thread = uuid.uuid4().hex[:8]

    def call(i: int) -> Any:
        tool_call = {"name": name, "args": {"to": "ann"}, "id": f"call_{i}", "type": "tool_call"}  # fmt: skip
        config: Any = {
            "configurable": {
                "thread_id": thread,
                "__pregel_checkpointer": SAVER,
                "checkpoint_ns": f"tools:{uuid.uuid4()}",
            },
            "metadata": {"langgraph_step": 1},
        }
        return tool.invoke(tool_call, config)

    return call


def _journaled(store: Any, fn: Any, calls: int = 20) -> _Counted:
    """`calls` calls of `fn` journaled on `store`'s backend, counted."""
    counted = _Counted(as_backend(store))
    call = _caller(fn, counted, True)
    for i in range(calls):
        answer = call(i)
        assert answer.content == fn(to="ann"), answer.content
    return counted


RAW_NS = ("langchain_resilient_tools", "journal_raw")
"""The raw puts' namespace: as deep as the journal's, beside it."""


def _raw_key() -> str:
    """A new key of the journal's form and length (tool, idempotency key, step)."""
    return entry_key("send_email", uuid.uuid4().hex, "tools@1")


def _stored(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` as the journal's `StoreBackend` hands it to a store."""
    return {"exp": 1e10, **encode(entry)}


def _bare(store: Any, intent: dict[str, Any], receipt: dict[str, Any]) -> Callable[[int], None]:
    """The store's own put of `intent`, then of `receipt`, under a new key each time."""
    intent, receipt = _stored(intent), _stored(receipt)

    def bare(i: int) -> None:
        key = _raw_key()
        store.put(RAW_NS, key, intent, index=False)
        store.put(RAW_NS, key, receipt, index=False)

    return bare


def _in_call(
    store: Any, intent: dict[str, Any], receipt: dict[str, Any], spent: list[float]
) -> Callable[[int], Any]:
    """A write with the journal off whose tool makes the store's own two puts where the
    journal makes its operations (the intent before the send, the receipt after it),
    appending the seconds the two took to `spent`."""
    intent, receipt = _stored(intent), _stored(receipt)

    def send_email(to: str) -> str:
        """Send an email."""
        key = _raw_key()
        start = time.perf_counter()
        store.put(RAW_NS, key, intent, index=False)
        took = time.perf_counter() - start
        sent = f"sent to {to}"
        start = time.perf_counter()
        store.put(RAW_NS, key, receipt, index=False)
        spent.append(took + time.perf_counter() - start)
        return sent

    return _caller(send_email, store, False)


def _paired(arms: dict[str, Callable[[int], Any]], iterations: int) -> dict[str, list[float]]:
    """Seconds of each arm per iteration, the arms' order rotating from one to the next."""
    turns = len(arms)
    for i in range(5):  # warm-up: imports, connections, prepared statements
        for fn in arms.values():
            fn(-1 - i)
    names = list(arms)
    timed: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iterations):
        for name in names[i % turns :] + names[: i % turns]:
            start = time.perf_counter()
            arms[name](i)
            timed[name].append(time.perf_counter() - start)
    return timed


def _us(values: Iterable[float]) -> float:
    return statistics.median(values) * 1e6


def _costs(timed: dict[str, list[float]], lo: int = 0, hi: int | None = None) -> dict[str, float]:
    """Over iterations ``lo:hi``, in µs: what the journal adds (``on - off``, paired), what
    the store's own two puts took in the same places, and the two puts alone."""
    on, off = timed["on"][lo:hi], timed["off"][lo:hi]
    return {
        "added": _us(b - a for a, b in zip(off, on, strict=True)),
        "raw": _us(timed["puts"][lo:hi]),
        "bare": _us(timed["bare"][lo:hi]),
    }


def measure(store: Any, iterations: int) -> dict[str, Any]:
    """One store's row: the arms, the ratio, and the operations counted."""
    entries = _journaled(store, send_email, 1).written  # [intent, receipt]
    puts: list[float] = []
    arms = {
        "on": _caller(send_email, store, True),
        "off": _caller(send_email, store, False),
        "raw": _in_call(store, entries[0], entries[-1], puts),
        "bare": _bare(store, entries[0], entries[-1]),
    }
    timed = _paired(arms, iterations)
    timed["puts"] = puts[-iterations:]  # the warm-up's left out
    costs = _costs(timed)
    size = max(1, iterations // ROUNDS)
    per_round = [_costs(timed, k * size, (k + 1) * size) for k in range(ROUNDS)]
    writes, reads = _journaled(store, send_email), _journaled(store, get_inbox)
    ratio = costs["added"] / costs["raw"]
    return {
        "iterations": iterations,
        "raw_us": round(costs["raw"], 1),
        "bare_us": round(costs["bare"], 1),
        "write_us_journal_off": round(_us(timed["off"]), 1),
        "write_us_journal_on": round(_us(timed["on"]), 1),
        "added_us_per_write": round(costs["added"], 1),
        "ratio": round(ratio, 2),
        "beyond_raw_us": round(costs["added"] - costs["raw"], 1),
        "ratio_to_bare": round(costs["added"] / costs["bare"], 2),
        "ratio_per_round": [round(c["added"] / c["raw"], 2) for c in per_round],
        "target_met": ratio <= TARGET,
        "round_trips_per_write": (writes.reads + writes.writes) / 20,
        "reads_per_write": writes.reads / 20,
        "round_trips_per_read": (reads.reads + reads.writes) / 20,
    }


@contextmanager
def _postgres(fsync: bool) -> Iterator[Any]:
    """A PostgresStore on a throwaway cluster, or `None` (with the reason printed)."""
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore

        from tests import pg
    except ImportError as exc:
        print(f"postgres: skipped ({exc})", file=sys.stderr)
        yield None
        return
    cluster = pg.start(fsync=fsync)
    if isinstance(cluster, str):
        print(f"postgres: skipped ({cluster})", file=sys.stderr)
        yield None
        return
    try:
        with psycopg.connect(cluster.url, autocommit=True, prepare_threshold=0) as conn:
            store = PostgresStore(conn)
            store.setup()
            yield store
    finally:
        cluster.stop()


def _sqlite(folder: str) -> Any:
    """A SqliteStore on a file in WAL mode (autocommit: the store runs its transactions)."""
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(
        str(Path(folder) / "store.db"), check_same_thread=False, isolation_level=None
    )
    conn.execute("PRAGMA journal_mode=WAL")
    store = SqliteStore(conn)
    store.setup()
    return store


def run(scale: float = 1.0, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every store's row (`ITERATIONS` times `scale` iterations; `only`: these stores)."""

    def wanted(name: str) -> bool:
        return not only or name in only

    def iterations(name: str) -> int:
        return max(ROUNDS, int(ITERATIONS[name] * scale))

    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lrt-journal-") as folder:
        if wanted("inmemorystore"):
            rows["inmemorystore"] = measure(InMemoryStore(), iterations("inmemorystore"))
        if wanted("sqlite"):
            store = _sqlite(folder)
            try:
                rows["sqlite"] = measure(store, iterations("sqlite"))
            finally:
                store.conn.close()  # Python 3.13 warns about a connection left open
    for name, fsync in (("postgres", True), ("postgres_fsync_off", False)):
        if wanted(name):
            with _postgres(fsync) as store:
                if store is not None:
                    rows[name] = measure(store, iterations(name))
    return {"target": TARGET, "rounds": ROUNDS, "rows": rows}


def table(result: dict[str, Any]) -> str:
    headers = ["store", "raw µs", "added µs", "ratio", "beyond raw µs", "per part", "bare µs", "to bare",
               "off µs", "on µs", "ops/write", "reads/write", "ops/read"]  # fmt: skip
    rows = [
        [name, r["raw_us"], r["added_us_per_write"], r["ratio"], r["beyond_raw_us"],
         " ".join(f"{x:g}" for x in r["ratio_per_round"]), r["bare_us"], r["ratio_to_bare"],
         r["write_us_journal_off"], r["write_us_journal_on"], r["round_trips_per_write"],
         r["reads_per_write"], r["round_trips_per_read"]]
        for name, r in result["rows"].items()
    ]  # fmt: skip
    return _util.format_table(headers, rows)


def main(quick: bool = False) -> tuple[dict[str, Any], str]:
    result = run(scale=0.02) if quick else run()
    return result, table(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a fiftieth of the iterations")
    parser.add_argument("--only", nargs="+", choices=list(ITERATIONS), default=[])
    args = parser.parse_args()
    meta = {**_util.run_metadata(), "command": "python -m bench.bench_journal"}  # load at start
    result = run(scale=0.02 if args.quick else 1.0, only=tuple(args.only))
    print(table(result))
    if not (args.quick or args.only):  # a full run: the results the docs show
        from . import journal_instructions  # it imports this module's arms

        result["instructions"] = {"inmemorystore": journal_instructions.measure()}
        print(f"instructions per write (InMemoryStore): {result['instructions']['inmemorystore']}")
        path = _util.save_json({"journal": result, "meta": meta}, _util.RESULTS_DIR / "journal.json")  # fmt: skip
        print(f"written: {path}")
