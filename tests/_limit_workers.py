"""Worker processes for the shared-limits tests and benchmark: each builds its own tools
on its own connection to one PostgreSQL database, as a separate server process would.

Run under ``multiprocessing`` spawn: nothing is shared with the parent but the database
(and a barrier, so the workers start together). Each tool execution is written to the
``limit_calls`` table: the tool, the worker, and when it started and ended by this
machine's clock (every worker runs on it): what the service behind the tools saw. Each
token the bucket gave is logged in ``limit_grants`` by a trigger, at the database's time
of the decision: what the bucket promises, without the moment between a token and the
tool's first line (which a loaded machine stretches).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from langchain_core.tools import StructuredTool
from langgraph.store.postgres import PostgresStore

from langchain_resilient_tools import Limits, ResilientTool, Shared, Timeouts, ToolPolicy
from langchain_resilient_tools.state.postgres import PostgresBackend

SETUP = (
    """CREATE TABLE IF NOT EXISTS limit_calls (tool text NOT NULL, worker int NOT NULL,
    started double precision NOT NULL, ended double precision NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS limit_grants (tool text NOT NULL, at double precision NOT NULL)",
)


_LOG_GRANTS = (
    """CREATE OR REPLACE FUNCTION limit_log_grant() RETURNS trigger AS $$
    BEGIN
        IF NEW.wait = 0 THEN INSERT INTO limit_grants VALUES (NEW.key, NEW.at); END IF;
        RETURN NEW;
    END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER limit_grants AFTER INSERT OR UPDATE ON lrt_buckets
    FOR EACH ROW EXECUTE FUNCTION limit_log_grant()""",
)


def setup(conn: Any, *, log_grants: bool = True) -> None:
    """Empty tables for a run: the calls, the grants, and the limits' own (made by a
    first decision), with each token the bucket gives logged in ``limit_grants`` at the
    time the database decided it (`log_grants`)."""
    for sql in SETUP:
        conn.execute(sql)
    conn.execute("TRUNCATE limit_calls, limit_grants")
    for table in ("lrt_buckets", "lrt_leases"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    backend = PostgresBackend(PostgresStore(conn))
    backend.take_token("setup", rate=1, burst=1)  # makes the limits' tables
    conn.execute("DELETE FROM lrt_buckets")
    if log_grants:
        for sql in _LOG_GRANTS:
            conn.execute(sql)


def _tool(name: str, url: str, worker: int, hold: float) -> StructuredTool:
    local = threading.local()

    def run(n: int) -> str:
        started = time.time()
        if hold:
            time.sleep(hold)
        ended = time.time()
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(url, autocommit=True)
        conn.execute(
            "INSERT INTO limit_calls VALUES (%s, %s, %s, %s)", (name, worker, started, ended)
        )
        return f"{name} {n}"

    return StructuredTool.from_function(run, name=name, description=f"The {name} service.")


def run(
    url: str,
    worker: int,
    jobs: list[dict[str, Any]],
    barrier: Any,
    shared: bool = True,
    threads: int = 4,
) -> None:
    """One worker: for each job (``tool``, ``calls``, ``hold`` seconds per call, and its
    ``limits``), a wrapped tool on this worker's store; every call of every job is made
    from a pool of `threads`, all at once after the barrier."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        store = PostgresStore(conn)
        where = Shared() if shared else Shared(backend="local")
        calls = []
        for job in jobs:
            policy = ToolPolicy(
                timeout=60,
                timeouts=Timeouts(deadline=None),
                limits=Limits(**job["limits"]),
                shared=where,
            )
            tool = ResilientTool.wrap(
                _tool(job["tool"], url, worker, job.get("hold", 0.0)), policy=policy, store=store
            )
            calls += [(tool, n) for n in range(job["calls"])]
        if barrier is not None:
            barrier.wait(120)
        with ThreadPoolExecutor(threads) as pool:
            answers = list(pool.map(lambda tn: tn[0].invoke({"n": tn[1]}), calls))
    assert all(isinstance(a, str) and not a.startswith("{") for a in answers), answers


def grants(conn: Any, tool: str) -> list[float]:
    """When the database gave each token of `tool`'s bucket, in order."""
    sql = "SELECT at FROM limit_grants WHERE tool = %s ORDER BY at"
    return [float(at) for (at,) in conn.execute(sql, (tool,)).fetchall()]


def calls(conn: Any, tool: str) -> list[tuple[float, float]]:
    """When each call of `tool` started and ended, in the order they started."""
    sql = "SELECT started, ended FROM limit_calls WHERE tool = %s ORDER BY started"
    return [(float(s), float(e)) for s, e in conn.execute(sql, (tool,)).fetchall()]


def most_in_window(times: list[float], window: float = 1.0) -> int:
    """The most of `times` in any closed window of `window` seconds (``[t, t + window]``,
    where a bucket of rate R and burst B allows ``R * window + B``)."""
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u <= t + window + 1e-9) for i, t in enumerate(times))


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of `spans` (start, end) that overlap at any moment."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = peak = 0
    for _, step in edges:  # at a tie an end comes first (-1 < 1): touching is not overlap
        now += step
        peak = max(peak, now)
    return peak


def main(url: str, worker: int, jobs: list[dict[str, Any]], barrier: Any, shared: bool = True) -> None:  # fmt: skip
    run(url, worker, jobs, barrier, shared)
