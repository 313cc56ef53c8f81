"""Limits shared across worker processes on PostgreSQL: ``python -m bench.bench_limits``.

N worker processes (2, 4, 8; `tests._limit_workers`, each with its own ``PostgresStore``
connection to one throwaway local cluster) call two tools at once, from 4 threads each:

- ``get_quote`` under ``Limits(rate_limit=RATE)`` (burst 1): what the service saw, as the
  most calls in any 1-s window and the rate over the run, against R + burst;
- ``get_report`` under ``Limits(max_concurrency=CAP)``, each call holding its slot for
  `HOLD` s: the most calls in flight at once, against the cap.

Each N runs twice: with the state shared in the store (the limits hold across workers)
and with ``Shared(backend="local")`` (each worker holds them alone: the baseline the
issue describes, N x R). Then: how soon a killed worker's slot comes back (against
``Limits.lease_s``), and the decision cost per call in one process: a tool under both
limits, per process against shared (one store round trip per decision). Prints tables and
writes ``bench/results/limits.json``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.tools import StructuredTool

from langchain_resilient_tools import Limits, ResilientTool, Shared, ToolPolicy

from . import _util

RATE, CAP, HOLD, LEASE_S = 20, 4, 0.1, 2.0
QUOTES, REPORTS = 80, 48
"""Calls of each tool per run, over all the workers."""


@contextmanager
def _cluster() -> Iterator[str | None]:
    """A throwaway PostgreSQL cluster's URL, or `None` (with the reason printed)."""
    from tests import pg

    cluster = pg.start()
    if isinstance(cluster, str):
        print(f"limits: skipped ({cluster})", file=sys.stderr)
        yield None
        return
    try:
        yield cluster.url
    finally:
        cluster.stop()


def _fresh(url: str, log_grants: bool = True) -> None:
    import psycopg

    from tests import _limit_workers

    with psycopg.connect(url, autocommit=True) as conn:
        _limit_workers.setup(conn, log_grants=log_grants)


def _workers(url: str, n: int, shared: bool, quotes: int, reports: int) -> dict[str, Any]:
    """One run of `n` workers; what the two services saw."""
    import psycopg

    from tests import _limit_workers as w

    _fresh(url)
    jobs = [
        {"tool": "get_quote", "calls": quotes // n, "limits": {"rate_limit": RATE}},
        {"tool": "get_report", "calls": reports // n, "hold": HOLD,
         "limits": {"max_concurrency": CAP}},
    ]  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=w.main, args=(url, i, jobs, barrier, shared)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
        if p.exitcode != 0:
            raise RuntimeError(f"a worker failed (exit code {p.exitcode})")
    with psycopg.connect(url, autocommit=True) as conn:
        quote_starts = [s for s, _ in w.calls(conn, "get_quote")]
        tokens = w.grants(conn, "get_quote")
        report_spans = w.calls(conn, "get_report")
    span = quote_starts[-1] - quote_starts[0]
    return {
        "quote_calls": len(quote_starts),
        "max_per_1s_window": w.most_in_window(quote_starts),
        "max_tokens_per_1s_window": w.most_in_window(tokens) if tokens else None,
        "rate_over_run": round((len(quote_starts) - 1) / span, 2) if span > 0 else None,
        "report_calls": len(report_spans),
        "max_in_flight": w.most_at_once(report_spans),
    }


def _killed(url: str) -> dict[str, Any]:
    """Seconds from SIGKILL of a worker holding the only slot until another gets it."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from langchain_resilient_tools.state.postgres import PostgresBackend
    from tests import _limit_workers as w

    _fresh(url)
    limits = {"max_concurrency": 1, "lease_s": LEASE_S}
    job = {"tool": "get_report", "calls": 1, "hold": 600, "limits": limits}
    proc = multiprocessing.get_context("spawn").Process(target=w.main, args=(url, 0, [job], None))
    proc.start()
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        backend = PostgresBackend(PostgresStore(conn))
        take = lambda: backend.acquire_lease("get_report", cap=1, holder="probe", ttl=60)  # noqa: E731
        try:
            while take():  # the worker holds no slot yet
                backend.release_lease("get_report", holder="probe")
                if not proc.is_alive():
                    raise RuntimeError("the worker died before it took a slot")
                time.sleep(0.05)
            time.sleep(LEASE_S)  # renewed meanwhile
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)
        killed = time.monotonic()
        while not take():
            time.sleep(0.01)
        back = time.monotonic() - killed
    return {"lease_s": LEASE_S, "slot_back_after_kill_s": round(back, 3)}


def _decision_cost(url: str, calls: int, rounds: int) -> dict[str, Any]:
    """Per-call cost in one process of a tool under both limits (never binding)."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from langchain_resilient_tools.state.choose import as_backend
    from langchain_resilient_tools.state.postgres import PostgresBackend

    def get_value(x: int) -> str:
        """Return a value."""
        return f"value {x}"

    _fresh(url, log_grants=False)
    limits = Limits(rate_limit=1e6, max_concurrency=1000)
    variants: dict[str, Callable[[int], Any]] = {}
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        store = PostgresStore(conn)
        for name, policy in (
            ("no_limits", ToolPolicy(timeout=None)),
            ("per_process", ToolPolicy(timeout=None, limits=limits, shared=Shared(backend="local"))),
            ("shared_postgres", ToolPolicy(timeout=None, limits=limits)),
        ):  # fmt: skip
            tool = ResilientTool.wrap(StructuredTool.from_function(get_value), policy=policy, store=store)  # fmt: skip
            variants[name] = lambda i, t=tool: t.invoke({"x": i})
        per_round: dict[str, list[float]] = {name: [] for name in variants}
        for r in range(rounds):
            names = list(variants)
            for name in names[r % 3 :] + names[: r % 3]:
                fn = variants[name]
                start = time.perf_counter()
                for i in range(calls):
                    fn(i)
                per_round[name].append((time.perf_counter() - start) / calls * 1e3)
        backend = as_backend(store)
        assert isinstance(backend, PostgresBackend)
        ops: dict[str, Callable[[int], Any]] = {
            "take_token": lambda i: backend.take_token("op", rate=1e6, burst=1),
            "acquire_lease": lambda i: backend.acquire_lease("op", cap=1000, holder=str(i), ttl=60),
            "release_lease": lambda i: backend.release_lease("op", holder=str(i)),
        }
        op_ms = {}
        for name, op in ops.items():
            start = time.perf_counter()
            for i in range(calls):
                op(i)
            op_ms[name] = round((time.perf_counter() - start) / calls * 1e3, 4)
    ms = {name: round(statistics.median(v), 4) for name, v in per_round.items()}
    return {
        "ms_per_call": ms,
        "ms_per_store_op": op_ms,
        "added_ms_per_process": round(ms["per_process"] - ms["no_limits"], 4),
        "added_ms_shared": round(ms["shared_postgres"] - ms["no_limits"], 4),
        "round_trips_per_attempt": {"rate_limit": 1, "max_concurrency": 2},
    }


def run(ns: tuple[int, ...] = (2, 4, 8), calls: int = 200, rounds: int = 5) -> dict[str, Any]:
    with _cluster() as url:
        if url is None:
            return {"skipped": "PostgreSQL could not start"}
        runs = []
        for n in ns:
            for shared in (True, False):
                seen = _workers(url, n, shared, QUOTES, REPORTS)
                runs.append({"workers": n, "limits": "shared" if shared else "per_process", **seen})
        return {
            "rate": RATE, "burst": 1, "cap": CAP, "hold_s": HOLD,
            "bound_per_1s_window": RATE + 1, "runs": runs,
            "kill": _killed(url), "cost": _decision_cost(url, calls, rounds),
        }  # fmt: skip


def table(result: dict[str, Any]) -> str:
    if "runs" not in result:
        return f"limits: {result.get('skipped')}"
    rows = [
        [r["workers"], r["limits"], r["max_per_1s_window"], result["bound_per_1s_window"],
         r["rate_over_run"], r["max_in_flight"], result["cap"]]
        for r in result["runs"]
    ]  # fmt: skip
    headers = ["workers", "limits", "max/1 s", "R+burst", "rate", "max in flight", "cap"]
    cost, kill = result["cost"], result["kill"]
    return (
        _util.format_table(headers, rows)
        + f"\nkilled worker's slot back after {kill['slot_back_after_kill_s']} s"
        + f" (lease {kill['lease_s']} s)\nms per call: {cost['ms_per_call']}"
    )


def main(quick: bool = False) -> tuple[dict[str, Any], str]:
    result = run(ns=(2,), calls=20, rounds=2) if quick else run()
    return result, table(result)


if __name__ == "__main__":
    result, text = main("--quick" in sys.argv)
    print(text)
    meta = _util.run_metadata()
    meta["command"] = " ".join(["python -m bench.bench_limits", *sys.argv[1:]])
    path = _util.save_json({**result, "meta": meta}, _util.RESULTS_DIR / "limits.json")
    print(f"written: {path}")
