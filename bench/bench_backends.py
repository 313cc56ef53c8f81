"""Bookkeeping cost per call of each state backend: ``python -m bench.bench_backends``.

One `ResilientTool` with a breaker, dedup (reuse) and a result cache, invoked directly
(sync) with fresh arguments each call, so that every call does the full bookkeeping:
dedup claim + outcome write, cache read + write, breaker read. Backends: in-process (the
default), LangGraph's ``InMemoryStore``, ``PostgresStore`` on a throwaway local cluster
and a ``redis.Redis`` client on a throwaway local ``redis-server`` (each skipped if its
server cannot start). Also times the raw backend operations (and, where the backend
shares limits, one token-bucket decision).
Prints a table and writes ``bench/results/backends.json``.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.tools import StructuredTool
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import BreakerPolicy, Cache, ResilientTool, ToolPolicy
from langchain_resilient_tools.state.choose import as_backend
from langchain_resilient_tools.state.limits import supports_limits

from . import _util

POLICY = ToolPolicy(timeout=None, breaker=BreakerPolicy(), cache=Cache(ttl_s=60))


def get_value(x: int) -> str:
    """Return a value."""
    return f"value {x}"


@contextmanager
def _postgres() -> Iterator[Any]:
    """A PostgresStore on a throwaway cluster, or `None` (with the reason printed)."""
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore

        from tests import pg
    except ImportError as exc:
        print(f"postgres: skipped ({exc})", file=sys.stderr)
        yield None
        return
    cluster = pg.start()
    if isinstance(cluster, str):
        print(f"postgres: skipped ({cluster})", file=sys.stderr)
        yield None
        return
    try:
        with psycopg.connect(cluster.url, autocommit=True, prepare_threshold=0) as conn:
            yield PostgresStore(conn)
    finally:
        cluster.stop()


@contextmanager
def _redis() -> Iterator[Any]:
    """A redis-py client of a throwaway server, or `None` (with the reason printed)."""
    try:
        import redis

        from tests import redis_server
    except ImportError as exc:
        print(f"redis: skipped ({exc})", file=sys.stderr)
        yield None
        return
    server = redis_server.start()
    if isinstance(server, str):
        print(f"redis: skipped ({server})", file=sys.stderr)
        yield None
        return
    try:
        with redis.Redis.from_url(server.url) as client:
            yield client
    finally:
        server.stop()


def _per_call_us(fn: Callable[[int], Any], calls: int, rounds: int) -> tuple[float, list[float]]:
    per_round = []
    base = 0
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(calls):
            fn(base + i)
        per_round.append((time.perf_counter() - start) / calls * 1e6)
        base += calls
    return statistics.median(per_round), per_round


def _tool_fn(store: Any) -> Callable[[int], Any]:
    tool = ResilientTool.wrap(
        StructuredTool.from_function(get_value), policy=POLICY.model_copy(), store=store
    )
    # On a thread: a call with none shares nothing, so it would not reach the store.
    config: Any = {"configurable": {"thread_id": "bench"}}
    return lambda i: tool.invoke({"x": i}, config)  # fresh arguments: every call misses


def _op_us(store: Any, calls: int, rounds: int) -> dict[str, float]:
    backend = as_backend(store)
    assert backend is not None
    ns = uuid.uuid4().hex[:8]
    ops: dict[str, Callable[[int], Any]] = {
        "put": lambda i: backend.put(ns, str(i), {"v": i}, ttl=60),
        "get": lambda i: backend.get(ns, str(i)),
        "claim": lambda i: backend.claim(ns, f"c{i}", 1, ttl=60),
    }
    if supports_limits(backend):
        take = backend.take_token  # type: ignore[attr-defined]
        ops["take_token"] = lambda i: take(ns, rate=1e9, burst=1e9)
    return {name: round(_per_call_us(fn, calls, rounds)[0], 2) for name, fn in ops.items()}


def run(calls: int = 300, rounds: int = 5) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    plain = StructuredTool.from_function(get_value)
    rows["tool_alone"] = {"us_per_call": round(_per_call_us(lambda i: plain.invoke({"x": i}), calls, rounds)[0], 2)}  # fmt: skip
    stores: dict[str, Any] = {"in_process": None, "inmemorystore": InMemoryStore()}
    with _postgres() as pg_store, _redis() as redis_client:
        if pg_store is not None:
            stores["postgres"] = pg_store
        if redis_client is not None:
            stores["redis"] = redis_client
        for name, store in stores.items():
            median, per_round = _per_call_us(_tool_fn(store), calls, rounds)
            rows[name] = {"us_per_call": round(median, 2), "per_round": [round(x, 2) for x in per_round]}  # fmt: skip
            if store is not None:
                rows[name]["ops_us"] = _op_us(store, calls, rounds)
    base = rows["in_process"]["us_per_call"]
    for name in stores:
        rows[name]["added_vs_in_process_us"] = round(rows[name]["us_per_call"] - base, 2)
    return {"calls": calls, "rounds": rounds, "policy": "breaker + dedup(reuse) + cache", "rows": rows}  # fmt: skip


def table(result: dict[str, Any]) -> str:
    rows = []
    for name, row in result["rows"].items():
        ops = row.get("ops_us", {})
        rows.append([name, row["us_per_call"], row.get("added_vs_in_process_us", ""),
                     ops.get("get", ""), ops.get("put", ""), ops.get("claim", ""),
                     ops.get("take_token", "")])  # fmt: skip
    headers = ["backend", "us/call", "added us", "get us", "put us", "claim us", "token us"]
    return _util.format_table(headers, rows)


def main(quick: bool = False) -> tuple[dict[str, Any], str]:
    result = run(calls=30, rounds=2) if quick else run()
    return result, table(result)


if __name__ == "__main__":
    result, text = main("--quick" in sys.argv)
    print(text)
    path = _util.save_json({"backends": result, "meta": _util.run_metadata()}, _util.RESULTS_DIR / "backends.json")  # fmt: skip
    print(f"written: {path}")
