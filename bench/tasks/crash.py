"""Tasks under a real process kill: SIGKILL right after a write took effect, then resume.

For each task (a few telecom tasks with several writes) and arm (``toolnode``, ``ours``),
a worker process runs the task with the `careful` agent on durable storage: the graph's
checkpoints in a `SqliteSaver` file, and for ``ours`` the write journal in a
`SqliteStore` file (``ResilientToolNode(..., store=store)``); the environment's database
is a JSON file written (and fsynced) after every write. The worker SIGKILLs itself right
after the k-th write of the task went through, before the tool returned (the effect
happened, nobody heard of it), for every k: one kill per write of each task. A fresh
process then resumes the thread (``invoke(None, config)``, or the input again when no
checkpoint was saved) and runs it to its end. Scored as the other episodes: the database
against the ground truth, extra and missing writes, unanswered calls.

Run through ``python -m bench.bench_tasks --crash``; a worker by hand:
``python -m bench.tasks.crash '{"task": ..., "arm": "ours", "dir": "/tmp/x", "kill": 1}' [resume]``
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from .core import Domain, Env, Task

ARMS = ("toolnode", "ours")
TASKS = (
    "[service_issue]overdue_bill_suspension[PERSONA:Easy]",
    "[service_issue]break_apn_settings[PERSONA:None]",
    "[mobile_data_issue]user_abroad_roaming_disabled_off[PERSONA:Hard]",
    "[mms_issue]break_app_both_permissions[PERSONA:Hard]",
    "[mobile_data_issue]data_usage_exceeded[PERSONA:Easy]",
)
"""Telecom tasks with several writes (or a write that adds up)."""
WAIT_S = 120.0


def _save(path: Path, env: Env) -> None:
    """The database and the write counts, on disk before this returns."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump({"db": env.db, "runs": dict(env.runs)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load(path: Path, task: Task, domain: Domain) -> Env:
    if path.exists():
        data = json.loads(path.read_text())
        return Env(data["db"], Counter(data["runs"]))
    return domain.new_env(task)


def _worker(sc: dict[str, Any], role: str) -> dict[str, Any]:
    """One process's run of the scenario `sc` (``role`` ``"first"`` or ``"resume"``)."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.store.sqlite import SqliteStore

    from langchain_resilient_tools import ResilientToolNode, ResilientToolsState, set_testing

    from . import telecom
    from .agents import TaskAgent
    from .arms import TIMEOUT_S, _odd

    set_testing(True)
    folder = Path(sc["dir"])
    domain = telecom.domain()
    task = next(t for t in domain.tasks if t.id == sc["task"])
    state_file = folder / "env.json"
    env = _load(state_file, task, domain)
    writes = [0]

    def on_write(name: str) -> None:
        _save(state_file, env)
        writes[0] += 1
        if role == "first" and writes[0] == sc["kill"]:
            os.kill(os.getpid(), signal.SIGKILL)

    env.on_write = on_write
    tools = domain.tools(env)
    agent = TaskAgent(domain=domain, task=task, kind="careful")
    conn = sqlite3.connect(folder / "checkpoints.db", check_same_thread=False, timeout=30)
    saver = SqliteSaver(conn)
    store = None
    if sc["arm"] == "ours":
        sconn = sqlite3.connect(
            folder / "store.db", check_same_thread=False, isolation_level=None, timeout=30
        )
        store = SqliteStore(sconn)
        store.setup()
        from langchain_resilient_tools import ToolPolicy

        node: Any = ResilientToolNode(
            tools, policy=ToolPolicy(timeout=TIMEOUT_S), policies=_odd(domain), store=store
        )
    else:
        node = ToolNode(tools)

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [agent.invoke(state["messages"])]}

    def route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
            return "tools"
        return END

    g = StateGraph(ResilientToolsState)
    g.add_node("agent", call_model)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    app = g.compile(checkpointer=saver, store=store)
    config: Any = {"configurable": {"thread_id": "task"}, "recursion_limit": 400}
    saved = saver.get_tuple(config) is not None
    report: dict[str, Any] = {"role": role, "resent_input": role != "first" and not saved}
    try:
        app.invoke(None if saved else {"messages": [HumanMessage(task.id)]}, config)
    except Exception as exc:
        report["exception"] = type(exc).__name__
    messages = app.get_state(config).values.get("messages", [])
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    report["tool_calls"] = len(asked)
    report["unanswered"] = sum(1 for i in asked if i not in answered)
    _save(state_file, env)
    return report


def _spawn(sc: dict[str, Any], role: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.tasks.crash", json.dumps(sc), role]
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=WAIT_S)
    if done.returncode == -signal.SIGKILL:
        return {"role": role, "killed": True}
    if done.returncode != 0:
        raise RuntimeError(f"crash worker failed ({done.returncode}): {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _one(domain: Domain, task: Task, arm: str, kill: int) -> dict[str, Any]:
    """Kill the task's run after its `kill`-th write, resume it, score it."""
    needed = domain.shadow(task, len(task.actions)).runs
    with tempfile.TemporaryDirectory(prefix="tasks-crash-") as tmp:
        sc = {"task": task.id, "arm": arm, "dir": tmp, "kill": kill}
        start = time.perf_counter()
        first = _spawn(sc, "first")
        resume = _spawn(sc, "resume")
        data = json.loads((Path(tmp) / "env.json").read_text())
    runs = data["runs"]
    expected = domain.shadow(task, len(task.actions)).db
    return {
        "task": task.id,
        "arm": arm,
        "kill_after_write": kill,
        "killed": bool(first.get("killed")),
        "passed": data["db"] == expected and "exception" not in resume,
        "extra_writes": sum(max(0, runs.get(w, 0) - needed.get(w, 0)) for w in domain.writes),
        "missing_writes": sum(max(0, needed.get(w, 0) - runs.get(w, 0)) for w in domain.writes),
        "unanswered": resume.get("unanswered"),
        "tool_calls": resume.get("tool_calls"),
        "resent_input": resume.get("resent_input"),
        "exception": resume.get("exception"),
        "wall_s": round(time.perf_counter() - start, 2),
    }


def run(
    domain: Domain,
    *,
    tasks: Sequence[str] = TASKS,
    arms: Sequence[str] = ARMS,
    workers: int = 4,
) -> list[dict[str, Any]]:
    """One kill after each write of each task (the 1st, the 2nd, ...), per arm, then a
    resume: what each led to. `workers` kills run side by side (each in processes of its
    own)."""
    from concurrent.futures import ThreadPoolExecutor

    by_id = {t.id: t for t in domain.tasks}
    jobs = []
    for tid in tasks:
        task = by_id[tid]
        writes = sum(domain.shadow(task, len(task.actions)).runs.values())
        jobs += [(task, arm, k) for k in range(1, max(1, writes) + 1) for arm in arms]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(lambda job: _one(domain, *job), jobs))


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]
        out.append(
            {
                "arm": arm,
                "kills": len(mine),
                "tasks": len({r["task"] for r in mine}),
                "killed": sum(r["killed"] for r in mine),
                "pass_rate": round(sum(r["passed"] for r in mine) / len(mine), 3),
                "extra_writes": sum(r["extra_writes"] for r in mine),
                "missing_writes": sum(r["missing_writes"] for r in mine),
                "unanswered": sum(r["unanswered"] or 0 for r in mine),
                "exceptions": sum(r["exception"] is not None for r in mine),
            }
        )
    return out


if __name__ == "__main__":
    print(
        json.dumps(_worker(json.loads(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "first"))
    )
