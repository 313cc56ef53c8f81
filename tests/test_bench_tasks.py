"""The task benchmark's runner scores episodes right (the synthetic domain: offline, no τ² data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from bench.tasks import synthetic
from bench.tasks.arms import ARMS
from bench.tasks.core import Action
from bench.tasks.run import run_episode, summarize, unanswered, write_counts
from langchain_resilient_tools.testing import Fault, FaultPlan

DOMAIN = synthetic.domain()
LAMP = next(t for t in DOMAIN.tasks if t.id == "lamp_on")


def _lost_reply_once() -> FaultPlan:
    """A plan whose first ``toggle_switch(lamp)`` loses its reply and whose next one runs."""
    args = {"name": "lamp"}
    for seed in range(1000):
        plan = FaultPlan(
            p=0.5, faults=(Fault.LOST_REPLY,), seed=seed, tools=frozenset({"toggle_switch"})
        )
        if plan.draw("toggle_switch", args, 0) and not any(
            plan.draw("toggle_switch", args, n) for n in (1, 2, 3)
        ):
            return plan
    raise AssertionError("no seed found")


@pytest.mark.parametrize("arm", ARMS)
def test_no_fault_every_arm_passes_with_one_call_per_action(arm: str) -> None:
    for task in DOMAIN.tasks:
        e = run_episode(DOMAIN, task, "none", "blind", arm)
        assert (e.passed, e.extra_writes, e.missing_writes, e.unanswered) == (True, 0, 0, 0)
        assert e.tool_calls == len(task.actions) and e.exception is None


def test_lost_reply_on_a_toggle_toolnode_raises_and_leaves_the_call_unanswered() -> None:
    e = run_episode(
        DOMAIN, LAMP, "lost_reply", "blind", "toolnode", given=(_lost_reply_once(), None)
    )
    assert e.exception == "ConnectionResetError" and not e.passed
    assert (e.extra_writes, e.missing_writes, e.unanswered, e.tool_calls) == (0, 0, 1, 1)
    assert e.runs == {"toggle_switch": 1}  # the lamp is on, but the episode ended in an exception


def test_lost_reply_on_a_toggle_langchain_retry_flips_it_back() -> None:
    e = run_episode(
        DOMAIN, LAMP, "lost_reply", "blind", "langchain", given=(_lost_reply_once(), None)
    )
    assert e.exception is None and not e.passed  # the retry ran the toggle again: the lamp is off
    assert (e.extra_writes, e.missing_writes, e.unanswered, e.tool_calls) == (1, 0, 0, 1)


def test_counts() -> None:
    msgs = [
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "a"}, {"name": "t", "args": {}, "id": "b"}],
                  invalid_tool_calls=[{"name": "t", "args": "{", "id": "c", "error": "x", "type": "invalid_tool_call"}]),
        ToolMessage("ok", tool_call_id="a"),
    ]  # fmt: skip
    assert unanswered(msgs) == (3, 2)
    assert write_counts(DOMAIN, {"toggle_switch": 2}, {"toggle_switch": 1, "add_credit": 1}) == (
        1,
        1,
    )
    e = run_episode(DOMAIN, LAMP, "none", "careful", "ours")
    (row,) = summarize([e])
    assert row["pass_rate"] == 1.0 and row["tool_calls_per_task"] == 1.0
    assert DOMAIN.check_for(Action("toggle_switch", {"name": "lamp"})) == Action(
        "get_switch", {"name": "lamp"}
    )


def test_a_narrowed_run_keeps_the_committed_results_and_the_readme(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only a full run writes ``tasks.json`` and the README's table; a run of fewer
    domains, faults, agents, arms or tasks prints and says why it saved nothing."""
    from bench import bench_tasks

    results, readme = tmp_path / "tasks.json", tmp_path / "README.md"
    monkeypatch.setattr(bench_tasks, "RESULTS", results)
    monkeypatch.setattr(bench_tasks, "README", readme)
    few = ["--domains", "synthetic", "--faults", "none", "--agents", "blind", "--arms", "ours"]
    got = bench_tasks.main(few)
    assert got["rows"] and got["rows"][0]["pass_rate"] == 1.0
    assert not results.exists() and not readme.exists()
    assert bench_tasks.main([*few, "--out", str(tmp_path / "mine.json")])["rows"]
    assert (tmp_path / "mine.json").exists() and not results.exists()


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        ([], None),
        (["--quick"], "--quick"),
        (["--tasks", "3"], "--tasks"),
        (["--faults", "none"], "only some faults"),
        (["--agents", "blind", "--arms", "ours"], "only some agents, arms"),
        (["--domains", "telecom"], "only some domains"),
    ],
)
def test_narrowed_says_why_a_run_is_not_the_full_one(argv: list[str], why: str | None) -> None:
    from bench.bench_tasks import arguments, narrowed

    args = arguments().parse_args(argv)
    assert narrowed(args, args.quick) == why
