"""One episode (a task, a fault, an agent, an arm) and what it is scored on.

An episode builds the domain's tools over a fresh environment, wraps them with the fault
kit (`with_faults`, one `FaultPlan` per task, the same for every arm and agent), wraps the
agent with `FaultyChatModel` for the model-side faults, runs the arm's graph to the end
and compares the environment with the task's ground truth.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from . import kit
from .agents import TaskAgent
from .arms import build
from .core import Domain, Env, Task

P_ALONE = 0.3
P_MIXED = 0.15
STALL_S = 0.5
RETRY_AFTER_S = 0.05
SETTLE_S = 5.0
"""Longest wait, after an episode, for calls a timeout abandoned (their effect may land)."""

TOOL_FAULTS = {
    "refused": "REFUSED",
    "reset": "RESET",
    "lost_reply": "LOST_REPLY",
    "stall": "STALL",
    "rate_limited": "RATE_LIMITED",
}
FAULTS = ("none", *TOOL_FAULTS, "repeat", "slips", "mixed")
QUICK_FAULTS = ("none", "lost_reply", "stall", "repeat", "mixed")


def task_seed(seed: int, task: Task) -> int:
    """The seed of one task's schedule (the same for every arm and agent)."""
    return seed * 1_000_003 + zlib.crc32(task.id.encode())


def plans(fault: str, domain: Domain, seed: int) -> tuple[Any, Any]:
    """(tool `FaultPlan` or `None`, `ModelFaultPlan` or `None`) for `fault`."""
    tools = frozenset(domain.names)

    def tool_plan(p: float, names: Sequence[str]) -> Any:
        faults = tuple(getattr(kit.Fault, n) for n in names)
        return kit.FaultPlan(
            p=p, faults=faults, seed=seed, stall_s=STALL_S, retry_after_s=RETRY_AFTER_S, tools=tools
        )

    slips = tuple(kit.Slip)
    if fault == "none":
        return None, None
    if fault in TOOL_FAULTS:
        return tool_plan(P_ALONE, [TOOL_FAULTS[fault]]), None
    if fault == "repeat":
        return None, kit.ModelFaultPlan(
            p_slip=0.0, p_repeat=P_ALONE, seed=seed, writes=domain.writes
        )
    if fault == "slips":
        return None, kit.ModelFaultPlan(
            p_slip=P_ALONE, slips=slips, seed=seed, writes=domain.writes
        )
    if fault == "mixed":
        model = kit.ModelFaultPlan(
            p_slip=P_MIXED, p_repeat=P_MIXED, slips=slips, seed=seed, writes=domain.writes
        )
        return tool_plan(P_MIXED, list(TOOL_FAULTS.values())), model
    raise ValueError(f"unknown fault {fault!r} (one of {', '.join(FAULTS)})")


@dataclass
class Episode:
    """What one episode did."""

    domain: str
    task: str
    fault: str
    agent: str
    arm: str
    passed: bool
    extra_writes: int
    missing_writes: int
    unanswered: int
    tool_calls: int
    wall_s: float
    exception: str | None = None
    faults_drawn: int = 0
    blind_checks: int = 0
    """Checks an error envelope named that could not show the write (`TaskAgent.blind_checks`)."""
    runs: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _InFlight:
    """Counts tool calls still running (a timed-out call's thread goes on)."""

    def __init__(self) -> None:
        self._n = 0
        self._cv = threading.Condition()

    def wrap(self, tool: BaseTool) -> BaseTool:
        def run(**kwargs: Any) -> Any:
            with self._cv:
                self._n += 1
            try:
                return tool.invoke(kwargs)
            finally:
                with self._cv:
                    self._n -= 1
                    self._cv.notify_all()

        return StructuredTool.from_function(
            func=run, name=tool.name, description=tool.description, args_schema=tool.args_schema
        )

    def settle(self, timeout: float) -> None:
        with self._cv:
            self._cv.wait_for(lambda: self._n == 0, timeout)


def unanswered(messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """(tool calls the model made, valid or invalid; those with no `ToolMessage`)."""
    asked: list[str] = []
    for m in messages:
        if isinstance(m, AIMessage):
            asked += [tc["id"] for tc in m.tool_calls if tc.get("id")]
            asked += [tc["id"] for tc in m.invalid_tool_calls if tc.get("id")]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return len(asked), sum(1 for i in asked if i not in answered)


def write_counts(
    domain: Domain, runs: Mapping[str, int], needed: Mapping[str, int]
) -> tuple[int, int]:
    """(extra, missing) write bodies against the ground truth's counts."""
    extra = sum(max(0, runs.get(w, 0) - needed.get(w, 0)) for w in domain.writes)
    missing = sum(max(0, needed.get(w, 0) - runs.get(w, 0)) for w in domain.writes)
    return extra, missing


def run_episode(
    domain: Domain,
    task: Task,
    fault: str,
    agent_kind: str,
    arm: str,
    *,
    seed: int = 0,
    given: tuple[Any, Any] | None = None,
) -> Episode:
    """One episode; `given` replaces the plans of `fault` (a tool `FaultPlan` or `None`,
    a `ModelFaultPlan` or `None`), e.g. for a test."""
    expected = domain.shadow(task, len(task.actions))
    env: Env = domain.new_env(task)
    tool_plan, model_plan = given or plans(fault, domain, task_seed(seed, task))
    log = kit.FaultLog()
    inflight = _InFlight()
    tools = domain.tools(env)
    if tool_plan is not None:
        tools = [kit.with_faults(t, tool_plan, log=log) for t in tools]
    tools = [inflight.wrap(t) for t in tools]
    agent = TaskAgent(domain=domain, task=task, kind=agent_kind)
    model: Any = agent
    if model_plan is not None:
        model = kit.FaultyChatModel(inner=agent, plan=model_plan)
    graph = build(arm, model, tools, domain=domain, task=task, agent=agent, env=env)
    config: Any = {
        "recursion_limit": 400,
        "configurable": {"thread_id": f"{task.id}/{fault}/{agent_kind}/{arm}"},
    }
    error = None
    start = time.perf_counter()
    try:
        result = graph.invoke({"messages": [HumanMessage(f"Task {task.id}")]}, config)
        messages = result["messages"]
    except Exception as exc:  # an episode the graph ended by raising: failed, counted
        error = type(exc).__name__
        messages = graph.get_state(config).values.get("messages", [])
    wall = time.perf_counter() - start
    inflight.settle(SETTLE_S)
    calls, dangling = unanswered(messages)
    extra, missing = write_counts(domain, env.runs, expected.runs)
    drawn = sum(1 for e in log.events if getattr(e, "fault", None) is not None)
    return Episode(
        domain=domain.name,
        task=task.id,
        fault=fault,
        agent=agent_kind,
        arm=arm,
        passed=error is None and env.db == expected.db,
        extra_writes=extra,
        missing_writes=missing,
        unanswered=dangling,
        tool_calls=calls,
        wall_s=round(wall, 4),
        exception=error,
        faults_drawn=drawn,
        blind_checks=agent.blind_checks,
        runs=dict(Counter(env.runs)),
    )


def summarize(episodes: Sequence[Episode]) -> list[dict[str, Any]]:
    """One row per (domain, fault, agent, arm): rates and per-task means."""
    cells: dict[tuple[str, str, str, str], list[Episode]] = {}
    for e in episodes:
        cells.setdefault((e.domain, e.fault, e.agent, e.arm), []).append(e)
    rows = []
    for (dom, fault, agent, arm), group in cells.items():
        n = len(group)
        rows.append(
            {
                "domain": dom,
                "fault": fault,
                "agent": agent,
                "arm": arm,
                "tasks": n,
                "pass_rate": round(sum(e.passed for e in group) / n, 3),
                "extra_writes": sum(e.extra_writes for e in group),
                "missing_writes": sum(e.missing_writes for e in group),
                "unanswered": sum(e.unanswered for e in group),
                "tool_calls_per_task": round(sum(e.tool_calls for e in group) / n, 2),
                "wall_s_per_task": round(sum(e.wall_s for e in group) / n, 3),
                "exceptions": sum(e.exception is not None for e in group),
                "blind_checks": sum(e.blind_checks for e in group),
                "faults_drawn": sum(e.faults_drawn for e in group),
                "exception_types": sorted({e.exception for e in group if e.exception}),
            }
        )
    return rows
