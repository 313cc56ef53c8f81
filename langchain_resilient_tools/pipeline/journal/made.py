"""Where the calls of an unanswered model message may have run: read off the thread's
checkpoints.

The write journal keeps a call's entry under the step of the thread that ran it
(``tools@7``: `core.resume.step_of`), and a model message does not say at which step its
calls ran. The checkpoints do. The message first appears in the checkpoint of the step
that wrote it (the model's, step A); its calls ran later, in the stopped run (the tools
node, after any ``after_model`` nodes), and before the next model message was written
(at step A' of that message, if there is one). The newest checkpoint before this step is
this run's input (step I, numbered right after the stopped run's last saved checkpoint).
With LangGraph's default ``durability="async"`` a step's checkpoint is saved while the
next step runs, so a worker that dies may lose the last one or two while the tools
already ran. The candidates are the steps from A + 1 to the later of A + `WINDOW` and
I + 1, and before A'. Steps of this run are not yet run (this runs where a run starts).

A message that first appears in a checkpoint a node did not write (the thread's input,
``update_state``, a subgraph's input from its parent) was made nobody knows where: no
step is a candidate, and a write's outcome stays unknown. A step is a candidate, not a
finding: the journal answers a call only with the entry of
its own tool, call id and arguments (`pipeline.journal.logic.judge`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

WINDOW = 8
"""At least this many steps after a message's are candidates (its agent's ``after_model``
nodes, and checkpoints lost with the worker)."""
MAX_WALK = 256
"""At most this many checkpoints are read back to find where a message first appears."""
_NS_SEP = "|"


@dataclass(frozen=True, slots=True)
class Made:
    """Where a model message was made: the steps of its thread where its calls may have
    run (step names, ``tools@7``) and when it was saved (wall time)."""

    steps: tuple[str, ...]
    at: float


def _ts(checkpoint: Mapping[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(checkpoint.get("ts"))).timestamp()
    except ValueError:
        return None


def _step(metadata: Mapping[str, Any] | None) -> int | None:
    step = (metadata or {}).get("step")
    return step if isinstance(step, int) else None


def _ids(checkpoint: Mapping[str, Any], messages_key: str) -> set[str]:
    messages = (checkpoint.get("channel_values") or {}).get(messages_key) or ()
    return {m.id for m in messages if getattr(m, "id", None)}


def _history(config: Mapping[str, Any]) -> tuple[Iterable[Any], str] | None:
    """The checkpoints of this run's graph before its current one, newest first, and the
    prefix of its steps' names (a subgraph's namespace); `None`: no checkpointer."""
    conf = config.get("configurable") or {}
    saver, thread = conf.get("__pregel_checkpointer"), conf.get("thread_id")
    ns = conf.get("checkpoint_ns")
    if saver is None or thread is None or not isinstance(ns, str):
        return None
    outer = ns.rpartition(_NS_SEP)[0]  # this node's own segment left out
    current = (conf.get("checkpoint_map") or {}).get(outer)
    graph = {"configurable": {"thread_id": thread, "checkpoint_ns": outer}}
    before = None if current is None else {"configurable": {"checkpoint_id": current}}
    return saver.list(graph, before=before, limit=MAX_WALK), outer + _NS_SEP if outer else ""


def where_made(
    config: Mapping[str, Any] | None, message_ids: Sequence[str], tools_node: str,
    messages_key: str = "messages",
) -> dict[str, Made]:  # fmt: skip
    """Where each of the model messages `message_ids` (oldest first) was made, for those
    found in the checkpoints of this run's thread; empty without a checkpointer, or when
    the checkpointer cannot be read here (an async-only one on the sync path)."""
    if not config or not message_ids:
        return {}
    try:
        found = _history(config)
        if found is None:
            return {}
        history, prefix = found
        first: dict[str, tuple[int, float] | None] = {}  # message id: (step, saved at)
        head: int | None = None  # the newest checkpoint's step: this run's input
        wanted = set(message_ids)
        for tup in history:
            step, at = _step(tup.metadata), _ts(tup.checkpoint)
            if step is None or at is None:
                break
            head = step if head is None else head
            ids = _ids(tup.checkpoint, messages_key)
            for mid in wanted & ids:  # made here by a node, or given (input, update)
                first[mid] = (step, at) if (tup.metadata or {}).get("source") == "loop" else None
            if wanted <= set(first) and not (wanted & ids):
                break  # every message found, and older checkpoints precede them all
    except Exception:  # e.g. an async-only checkpointer read on its event loop
        log.warning("dangling calls: the thread's checkpoints could not be read", exc_info=True)
        return {}  # then no step is known: a write's outcome stays unknown
    return _candidates(message_ids, first, head, prefix, tools_node)


def _candidates(
    message_ids: Sequence[str], first: Mapping[str, tuple[int, float] | None],
    head: int | None, prefix: str, tools_node: str,
) -> dict[str, Made]:  # fmt: skip
    """The candidate steps of each message made by a node of this graph (one that came
    in as input or by ``update_state`` ran its calls nobody knows where: left out)."""
    known = [(mid, f) for mid in message_ids if (f := first.get(mid)) is not None]
    out: dict[str, Made] = {}
    for i, (mid, (step, at)) in enumerate(known):
        end = max(step + 1 + WINDOW, (head if head is not None else step) + 2)
        if i + 1 < len(known):  # before the next model message was written
            end = min(end, known[i + 1][1][0])
        out[mid] = Made(tuple(f"{prefix}{tools_node}@{s}" for s in range(step + 1, end)), at)
    return out
