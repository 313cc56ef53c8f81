"""Run a fault scenario through an adapter and check DESIGN.md's invariants on the result.

`check_scenario` returns the list of violations (empty when every invariant held) and
adds the scenario to `STATS`, which `tests/conftest.py` prints at the end of the run.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langchain_resilient_tools import RetryPolicy, ToolPolicy
from langchain_resilient_tools.runtime.executor import default_runner, dispatch_pool
from langchain_resilient_tools.testing import invalid_call, tool_call
from tests.conftest import Harness
from tests.reliability.faults import (
    GARBAGE,
    HANG_TIMEOUT,
    HUGE,
    OTHER_TIMEOUT,
    RAISES,
    RUNNABLE,
    CallSpec,
    Ledger,
    Scenario,
    build_tool,
    expected_result,
)

ENVELOPE_KEYS = frozenset({"error", "tool", "message", "suggestion", "retryable", "attempts"})
TIME_MARGIN = 20.0
"""Seconds allowed on top of the hang timeouts for one graph run (graph overhead, a busy
machine): far below `HANG_LIMIT`, what a hang that was not cut takes."""


@dataclass
class Stats:
    """Counters over the whole run (over every xdist worker), printed by `tests/conftest.py`."""

    scenarios: int = 0
    calls: int = 0
    faults: int = 0
    violations: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self, *, scenarios: int = 0, calls: int = 0, faults: int = 0, violations: int = 0
    ) -> None:
        with self._lock:
            self.scenarios += scenarios
            self.calls += calls
            self.faults += faults
            self.violations += violations

    def line(self) -> str:
        return (
            f"reliability: {self.scenarios} scenarios, {self.calls} calls, "
            f"{self.faults} faults injected, {self.violations} violations"
        )


STATS = Stats()


@dataclass
class Phase:
    """One graph run (the first, or a resume after an interrupt)."""

    state: Any
    seconds: float
    executions: Counter[tuple[str, str]]


def policies_for(scenario: Scenario) -> tuple[ToolPolicy, dict[str, ToolPolicy]]:
    policy = ToolPolicy(
        timeout=OTHER_TIMEOUT, retry=RetryPolicy(max_attempts=scenario.max_attempts)
    )
    hung = {
        t.name: ToolPolicy(timeout=HANG_TIMEOUT) for t in scenario.tools if t.behaviour == "hang"
    }
    return policy, hung


def ai_message(scenario: Scenario) -> AIMessage:
    calls, bad = [], []
    for c in scenario.calls:
        if c.kind == "malformed":
            bad.append(invalid_call(c.tool, '{"query": "' + c.query, id=c.id))
        elif c.kind == "repairable":
            bad.append(invalid_call(c.tool, "{'query': '" + c.query + "',}", id=c.id))
        else:
            calls.append(tool_call(c.tool, {"query": c.query}, id=c.id))
    return AIMessage("", tool_calls=calls, invalid_tool_calls=bad)


def run_phases(harness: Harness, scenario: Scenario, ledger: Ledger) -> list[Phase]:
    """Run the scenario; after an interrupt, resume it (at most twice) with approval."""
    tools = [build_tool(t, ledger) for t in scenario.tools]
    policy, policies = policies_for(scenario)
    ai = ai_message(scenario)
    graph = harness.build(
        tools, policy=policy, policies=policies, checkpointer=InMemorySaver(), ai=ai
    )
    payload: Any = {"messages": [HumanMessage("go")] if harness.adapter == "middleware" else [ai]}
    config = {"configurable": {"thread_id": "reliability"}}
    phases: list[Phase] = []
    for _ in range(3):
        ledger.executions.clear()
        start = time.monotonic()
        state = harness.invoke(graph, payload, config)
        phases.append(Phase(state, time.monotonic() - start, Counter(ledger.executions)))
        pending = state.get("__interrupt__") if isinstance(state, dict) else None
        if not pending:
            break
        payload = Command(resume={i.id: "yes" for i in pending})
    return phases


def settle(ledger: Ledger) -> list[str]:
    """Release hung tools, wait for their abandoned threads to be reclaimed, check the pools."""
    ledger.release.set()
    runner = default_runner()
    deadline = time.monotonic() + 30.0  # at once, unless the machine is very busy
    while runner.abandoned() and time.monotonic() < deadline:
        time.sleep(0.005)
    problems = []
    if runner.abandoned():
        problems.append(f"{runner.abandoned()} abandoned worker threads never reclaimed")
    for pool in (runner.pool, dispatch_pool()):
        if pool.threads > pool.max_workers:
            problems.append(f"pool has {pool.threads} threads > max_workers {pool.max_workers}")
    return problems


def check_scenario(harness: Harness, scenario: Scenario) -> list[str]:
    """Run `scenario` through `harness`'s adapter and mode; return the invariant violations."""
    ledger = Ledger()
    try:
        phases = run_phases(harness, scenario, ledger)
        violations = check(harness.adapter, scenario, phases)
    except Exception as exc:  # a run that raises at all is a violation (control flow included)
        violations = [f"the run raised {type(exc).__name__}: {exc}"[:300]]
    finally:
        violations_after = settle(ledger)
    violations += violations_after
    STATS.add(
        scenarios=1,
        calls=len(scenario.calls),
        faults=scenario.faults(),
        violations=len(violations),
    )
    return violations


def check(adapter: str, scenario: Scenario, phases: list[Phase]) -> list[str]:
    """Every invariant of DESIGN.md that the scenario's outcome must satisfy."""
    out: list[str] = []
    first = phases[0].state
    if scenario.has_interrupt and "__interrupt__" not in first:
        out.append("a tool called interrupt() but the run did not stop with __interrupt__")
    if not scenario.has_interrupt and any("__interrupt__" in p.state for p in phases):
        out.append("the run was interrupted though no tool called interrupt()")
    if "__interrupt__" in phases[-1].state:
        out.append("the run was still interrupted after resuming")
    out += _check_timing(scenario, phases)
    out += _check_executions(scenario, phases)
    final = phases[-1].state
    answers = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    counts = Counter(m.tool_call_id for m in answers)
    by_id = {m.tool_call_id: m for m in answers}
    ids = {c.id for c in scenario.calls}
    for extra in set(counts) - ids:
        out.append(f"answer for call id {extra!r} that the AIMessage never made")
    for c in scenario.calls:
        owned = adapter != "tool" or c.kind in ("valid", "dup")  # else ToolNode's business
        if adapter == "tool" and c.kind == "repairable":
            owned = False
        n = counts.get(c.id, 0)
        if n > 1 or (owned and n != 1):
            out.append(f"{c.id} ({c.kind} {c.tool}) answered {n} times")
        elif owned:
            problems = _check_answer(scenario, phases, c, by_id[c.id]) + _check_attempts(
                scenario, c, by_id[c.id]
            )
            out += [f"{c.id} ({c.kind} {c.tool}): {p}" for p in problems]
    if adapter != "tool":
        errored = Counter(m.tool_call_id for m in answers if m.status == "error")
        recorded = Counter(r.get("tool_call_id") for r in final.get("tool_errors", []))
        if errored != recorded:
            out.append(f"tool_errors records {dict(recorded)} != error answers {dict(errored)}")
    return out


def _check_timing(scenario: Scenario, phases: list[Phase]) -> list[str]:
    budget = TIME_MARGIN
    for c in scenario.calls:
        spec = scenario.tool(c.tool)
        if c.kind in RUNNABLE and spec is not None and spec.behaviour == "hang":
            budget += HANG_TIMEOUT * (scenario.max_attempts if spec.idempotent else 1)
    return [
        f"run {i} took {p.seconds:.2f} s > {budget:.2f} s allowed by the timeouts"
        for i, p in enumerate(phases)
        if p.seconds > budget
    ]


def _check_executions(scenario: Scenario, phases: list[Phase]) -> list[str]:
    out = []
    ids_per_key = Counter((c.tool, c.query) for c in scenario.calls if c.kind in RUNNABLE)
    for i, phase in enumerate(phases):
        for (tool, query), n in phase.executions.items():
            spec = scenario.tool(tool)
            assert spec is not None
            allowed = ids_per_key.get((tool, query), 0)
            if spec.idempotent:
                allowed *= scenario.max_attempts
            if spec.behaviour == "interrupt":
                allowed *= 2  # an interrupted tool re-runs from its start on resume
            if n > allowed:
                kind = "idempotent" if spec.idempotent else "NON-idempotent"
                out.append(f"run {i}: {kind} {tool}({query}) executed {n} times, allowed {allowed}")
    return out


def _check_attempts(scenario: Scenario, c: CallSpec, msg: ToolMessage) -> list[str]:
    """An error's ``attempts``: 1 at most for a non-idempotent tool, else max_attempts."""
    spec = scenario.tool(c.tool)
    if msg.status != "error" or spec is None or c.kind not in RUNNABLE:
        return []
    attempts = _body(msg).get("attempts")
    limit = scenario.max_attempts if spec.idempotent else 1
    if not isinstance(attempts, int) or attempts > limit:
        return [f"error reports {attempts!r} attempts, at most {limit} allowed"]
    return []


def _body(message: ToolMessage) -> dict[str, Any]:
    try:
        data = json.loads(message.content) if isinstance(message.content, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not set(data) >= ENVELOPE_KEYS:
        return {"error": "<not an envelope>"}
    return data


def _check_answer(
    scenario: Scenario, phases: list[Phase], c: CallSpec, msg: ToolMessage
) -> list[str]:
    """What the answer to one call must look like, given its tool's behaviour."""
    if c.kind == "unknown":
        return _error_in(msg, {"unknown_tool"})
    if c.kind == "malformed":
        return _error_in(msg, {"malformed_call"})
    if c.kind == "repairable":  # repaired (and run, its answer marked) or reported as malformed
        problems = _expected(scenario, phases, c, msg)
        return [] if not problems or _body(msg)["error"] == "malformed_call" else problems
    return _expected(scenario, phases, c, msg)


def _expected(scenario: Scenario, phases: list[Phase], c: CallSpec, msg: ToolMessage) -> list[str]:
    spec = scenario.tool(c.tool)
    assert spec is not None
    b = spec.behaviour
    twins = sum(
        1 for o in scenario.calls if o.kind in RUNNABLE and (o.tool, o.query) == (c.tool, c.query)
    )
    resumed = len(phases) > 1
    # On resume a node re-runs its calls with the same ids: they are answered with what
    # they returned the first time, never as duplicates of themselves.
    dup_err = {"duplicate_call"} if twins > 1 else set()
    marked = twins > 1 or resumed or c.kind == "repairable"  # reused/repaired: with a notice
    relaxed = twins > 1 or resumed  # a shared or re-run flap budget: either outcome
    expected = expected_result(spec, c.query)
    if b in ("ok", "interrupt"):
        return (
            _success_or(msg, expected, dup_err)
            if dup_err
            else _success(msg, expected, marked_ok=marked)
        )
    if b in GARBAGE:
        return _success_or(msg, HUGE[:100] if b == "huge" else "", dup_err)
    if b in RAISES:
        return _error_in(msg, {"tool_error"} | dup_err)
    if b == "hang":
        # A write's timeout is an unknown outcome once it started; a plain timeout when its
        # attempt never started (a busy machine's worker did not pick it up in time), or
        # still an unknown outcome (true: the attempt was handed to the tool, whose body
        # had not yet run when it timed out).
        ran = sum(p.executions[(c.tool, c.query)] for p in phases)
        timeouts = {"timeout"} if spec.idempotent else {"unknown_outcome"} if ran else {"timeout", "unknown_outcome"}  # fmt: skip
        return _error_in(msg, timeouts | {"transient_failure"} | dup_err)
    # flapping: fails int(b[-1]) times per query, then answers
    if relaxed:
        return _success_or(msg, expected, {"transient_failure", "unknown_outcome"} | dup_err)
    if not spec.idempotent:
        return _error_in(msg, {"unknown_outcome"})
    if int(b[-1]) < scenario.max_attempts:
        return _success(msg, expected, marked_ok=marked)
    return _error_in(msg, {"transient_failure"}, attempts=scenario.max_attempts)


def _success(msg: ToolMessage, expected: str, *, marked_ok: bool = False) -> list[str]:
    if msg.status != "success":
        return [f"expected the real result {expected!r}, got error {str(msg.content)[:200]}"]
    content = str(msg.content)
    if content == expected or (marked_ok and content.endswith(expected)):
        return []
    return [f"expected the real result {expected!r}, got {content[:200]!r}"]


def _success_or(msg: ToolMessage, expected: str, errors: set[str]) -> list[str]:
    if msg.status == "success":
        return (
            []
            if expected in str(msg.content)
            else [f"success without {expected[:40]!r}: {str(msg.content)[:200]!r}"]
        )
    return _error_in(msg, errors)


def _error_in(msg: ToolMessage, errors: set[str], *, attempts: int | None = None) -> list[str]:
    if msg.status != "error":
        return [f"expected an error in {sorted(errors)}, got success {str(msg.content)[:200]!r}"]
    body = _body(msg)
    if body["error"] not in errors:
        return [f"expected an error in {sorted(errors)}, got {str(msg.content)[:300]}"]
    if attempts is not None and body["attempts"] != attempts:
        return [f"expected {attempts} attempts, got {body['attempts']}"]
    return []
