"""Where a call was issued: what tells the same call run again from a new call that
reuses its id.

A kept answer is given to a call as *its own* (a journal receipt; dedup's replay of the
same tool call) only when a run is resuming that call (DESIGN.md, invariant 13): same
thread, same step of that thread, same tool call id, same arguments. Model providers and
local models repeat tool call ids (``call_0`` in every turn), so the id alone does not
tell a resumed call from a new one that happens to reuse it.

LangGraph gives each task the position of its step: its checkpoint namespace (``tools``
at the top level; ``agent:<task id>|tools`` inside a subgraph run by task ``agent``) and
its step number (``metadata["langgraph_step"]``). A run that resumes a thread re-runs its
pending step at the same position; a fresh run of the thread (a new message, a new turn)
runs its tools at a later step. The task id of the step itself is left out on purpose:
with LangGraph's default ``durability="async"`` a worker can die before the checkpoint
of the step was saved, and the resumed step then gets a new task id although it runs the
same saved tool calls. (Replaying or forking from an old checkpoint makes new steps: a
write there runs again, as the person who forked asked.)

`step_of` is that position, for a thread of a graph with a checkpointer (without one,
nothing can resume a run). `position` also places a call of a run that cannot be resumed
(its graph task: new in every run), and knows nothing of a call outside a graph.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .call import Call
from .digest import hex_digest

_CHECKPOINTER = "__pregel_checkpointer"
_TASK_ID = "__pregel_task_id"
_NS_SEP, _NS_END = "|", ":"
"""LangGraph's separators in a checkpoint namespace (``node:task_id|node:task_id``)."""


def _conf(call: Call) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    config: Mapping[str, Any] = call.config or {}
    return config.get("configurable") or {}, config.get("metadata") or {}


def step_of(call: Call) -> str | None:
    """The resumable step `call` belongs to (``"tools@3"``), or `None`: no thread, no
    checkpointer, or not run by a graph task."""
    config = call.config
    if not call.thread_id or not config:
        return None
    conf = config.get("configurable")
    if not conf or conf.get(_CHECKPOINTER) is None:
        return None
    step, ns = (config.get("metadata") or {}).get("langgraph_step"), conf.get("checkpoint_ns")
    if not isinstance(step, int) or not isinstance(ns, str) or not ns:
        return None
    outer, _, last = ns.rpartition(_NS_SEP)
    node = last.partition(_NS_END)[0]  # this step's own task id left out
    return f"{outer}{_NS_SEP if outer else ''}{node}@{step}"


def position(call: Call) -> str | None:
    """Where `call` was issued: its resumable step (`step_of`), else the graph task that
    runs it (a run without a checkpointer: no later run has that task), else `None`
    (outside a graph: not known)."""
    step = step_of(call)
    if step is not None:
        return step
    task = _conf(call)[0].get(_TASK_ID)
    return None if task is None else f"task:{task}"


@functools.lru_cache(maxsize=4096)
def step_digest(step: str) -> str:
    """A short fixed-length form of `step` for a key (steps recur: kept for the last few
    thousand)."""
    return hex_digest(step, 8)
