"""Taking a checkpointed thread back in time, as a worker that died mid-step leaves it.

`rewind` drops what a checkpointer saved of a thread after one checkpoint: its later
checkpoints and the writes of the steps that ran from it. A worker killed in a step,
before that step's writes and checkpoint were saved, leaves exactly that; the next run
of the thread then resumes the step (tests/test_crash_safety.py kills real processes).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from langchain_resilient_tools.state.sqlite import database_file


def rewind(saver: Any, thread: str, checkpoint_id: str) -> None:
    """Drop what the checkpointer saved of `thread` after `checkpoint_id` (its later
    checkpoints, and the writes of the steps that ran from it): as if the worker that ran
    those steps had died before it saved them."""
    if isinstance(saver, InMemorySaver):
        for ns in saver.storage[thread].values():
            for cid in [c for c in ns if c > checkpoint_id]:
                del ns[cid]
        for key in [k for k in saver.writes if k[0] == thread and k[2] >= checkpoint_id]:
            del saver.writes[key]
        return
    conn = saver.conn
    path = database_file(conn)
    assert path is not None
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        where = "WHERE thread_id = ? AND checkpoint_id"
        db.execute(f"DELETE FROM checkpoints {where} > ?", (thread, checkpoint_id))
        db.execute(f"DELETE FROM writes {where} >= ?", (thread, checkpoint_id))
