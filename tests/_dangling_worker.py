"""A worker process for `tests/test_dangling_kills.py`: a `create_agent` agent on a
SQLite checkpointer that sends one email and SIGKILLs itself at a kill point of the
crash-safety harness (`tests.chaos.worker.POINTS`), e.g. between the send and its
answer. Run as ``python -m tests._dangling_worker FOLDER KILL_POINT``."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_resilient_tools import ResilientToolsMiddleware
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.chaos import worker
from tests.support.storage import sqlite_connect

THREAD: dict[str, Any] = {"configurable": {"thread_id": "t1"}}
SEND = AIMessage("", tool_calls=[tool_call("send_email", {"to": "alice@example.com"}, id="call-1")])


class LaggingSaver(worker.KillingSqliteSaver):
    """Saves the second checkpoint that holds the model's calls (the one after its
    ``after_model`` step) late: with ``durability="async"`` the tools' step runs and the
    process dies before it is saved, so the thread's last checkpoint is the model's own,
    two steps before the step that ran the write."""

    _with_calls = 0
    model_saved = threading.Event()
    """Set once the model's own checkpoint (the first that holds its calls) is saved."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        messages = (checkpoint.get("channel_values") or {}).get("messages") or ()
        calls = any(getattr(m, "tool_calls", None) for m in messages)
        self._with_calls += calls
        if calls and self._with_calls == 2:
            time.sleep(5)  # the kill comes first
        out = super().put(config, checkpoint, metadata, new_versions)
        if calls and self._with_calls == 1:
            self.model_saved.set()
        return out


def _tools_after_the_models_checkpoint() -> None:
    """The email tool starts once the model's checkpoint is saved (under load the kill
    could otherwise come before it, and lose the model's message too)."""
    reach = worker.reach

    def waiting(point: str) -> None:
        if point == "before_tool":
            LaggingSaver.model_saved.wait(60)
        reach(point)

    worker.reach = waiting  # the email tool looks it up when it runs


def agent(
    folder: Path, conn: sqlite3.Connection, script: list[AIMessage], *, lag: bool = False
) -> tuple[Any, Any]:
    """The agent (and its scripted model) on `folder`'s checkpointer, in any process."""
    model = ScriptedChatModel(script=script)
    app = create_agent(
        model,
        tools=[worker.email_tool(folder, 0.01)],
        middleware=[ResilientToolsMiddleware()],
        checkpointer=(LaggingSaver if lag else worker.KillingSqliteSaver)(conn),
    )
    return app, model


def main(folder: str, kill: str, durability: str = "sync", lag: bool = False) -> None:
    """Run the thread until the process kills itself at `kill`; `durability` is
    LangGraph's (``"sync"``: each step's checkpoint is saved before the next step runs;
    ``"async"``, its default: while it runs, so a kill may lose the last ones; `lag`
    makes it lose the one before the tools' step, `LaggingSaver`)."""
    worker._kill = kill  # the process kills itself there (once)
    if lag:
        _tools_after_the_models_checkpoint()
    conn = sqlite_connect(Path(folder) / "checkpoints.db", timeout=30)
    app, _ = agent(Path(folder), conn, [SEND, AIMessage("done")], lag=lag)
    app.invoke({"messages": [HumanMessage("email alice")]}, THREAD, durability=durability)
    raise SystemExit(3)  # never reached its kill point


if __name__ == "__main__":
    main(*sys.argv[1:])
