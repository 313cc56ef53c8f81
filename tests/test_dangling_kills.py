"""Dangling tool calls after a real SIGKILL (issue 45, item 8).

A worker process (`tests._dangling_worker`) runs a `create_agent` agent with
`ResilientToolsMiddleware` on a SQLite checkpointer (the journal in the same file) and
SIGKILLs itself at a point of the email it sends. This process, fresh to the thread,
sends a new user message (which LangGraph does not treat as a resume: the killed step's
calls are dropped) and checks what the model was given: a history providers accept,
and the email answered from the journal, never sent again.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tests import _dangling_worker as dw
from tests.chaos.worker import read_lines
from tests.support.answers import by_id
from tests.support.storage import sqlite_connect
from tests.test_dangling import provider_problems

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ctx() -> Any:
    """Workers fork from a server that imported them once (as the chaos harness's do)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.chaos.worker", "tests._dangling_worker"])
    return context


def killed_at(
    ctx: Any, folder: Path, point: str, durability: str = "sync", lag: bool = False
) -> None:
    proc = ctx.Process(target=dw.main, args=(str(folder), point, durability, lag), daemon=True)
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL, f"the worker ended with {proc.exitcode}"


def new_message(folder: Path) -> tuple[list[BaseMessage], dict[str, ToolMessage]]:
    """The model's input after the user writes again, and the thread's answers."""
    conn = sqlite_connect(folder / "checkpoints.db", timeout=30)
    try:
        app, model = dw.agent(folder, conn, [AIMessage("Let me check.")])
        state = app.invoke({"messages": [HumanMessage("did it go?")]}, dw.THREAD)
    finally:
        conn.close()
    assert provider_problems(state["messages"]) == []
    answers = by_id(state["messages"])
    return model.seen[0], answers


@pytest.mark.parametrize("point", ["before_tool", "after_effect"])
def test_a_write_killed_mid_call_is_answered_unknown_outcome(
    ctx: Any, tmp_path: Path, point: str
) -> None:
    """Killed after its intent was recorded (before or after the send): no receipt,
    so the model is told the outcome is unknown and how to find out; nothing runs."""
    killed_at(ctx, tmp_path, point)
    sent = read_lines(tmp_path / "outbox.jsonl")
    assert len(sent) == (1 if point == "after_effect" else 0)
    seen, answers = new_message(tmp_path)
    assert provider_problems(seen) == []
    body = json.loads(str(answers["call-1"].content))
    assert body["error"] == "unknown_outcome"
    assert "by a worker that stopped before it confirmed the result" in body["message"]
    assert read_lines(tmp_path / "outbox.jsonl") == sent  # not sent again


@pytest.mark.parametrize("point", ["after_return", "during_checkpoint"])
def test_a_write_that_answered_before_the_kill_is_answered_from_its_receipt(
    ctx: Any, tmp_path: Path, point: str
) -> None:
    """Killed once the email was sent and its receipt written, before the step's
    checkpoint (its answer not saved at all, or saved only as a pending write that the
    new message's run drops): the model gets the answer it would have got."""
    killed_at(ctx, tmp_path, point)
    assert len(read_lines(tmp_path / "outbox.jsonl")) == 1
    seen, answers = new_message(tmp_path)
    assert provider_problems(seen) == []
    answer = answers["call-1"]
    assert answer.status == "success"
    assert str(answer.content).endswith("\nsent to alice@example.com")
    assert answer.response_metadata["resilience"]["served_by"] == "journal"
    assert len(read_lines(tmp_path / "outbox.jsonl")) == 1  # not sent again


def test_with_lost_checkpoints_a_write_is_never_said_not_run(ctx: Any, tmp_path: Path) -> None:
    """LangGraph's default ``durability="async"`` saves a step's checkpoint while the next
    step runs, so a kill mid-write may lose the last ones (`LaggingSaver` makes it lose
    the one after ``after_model``): the thread's last checkpoint is then the model's
    own, and the write ran two steps later. The journal is read at those steps too: the
    email that was sent is answered ``unknown_outcome``, never ``not_run``."""
    killed_at(ctx, tmp_path, "after_effect", durability="async", lag=True)
    assert len(read_lines(tmp_path / "outbox.jsonl")) == 1
    seen, answers = new_message(tmp_path)
    assert provider_problems(seen) == []
    assert json.loads(str(answers["call-1"].content))["error"] == "unknown_outcome"
    assert len(read_lines(tmp_path / "outbox.jsonl")) == 1
