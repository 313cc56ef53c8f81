"""What the LangGraph task a call runs in says about time and shutdown.

LangGraph 1.2 times a node's attempts (``add_node(..., timeout=TimeoutPolicy(...))``, or
``Send(node, arg, timeout=...)`` for one pushed task, which replaces the node's): past
`run_timeout` seconds, or `idle_timeout` seconds without progress, it cancels the node
and the step fails with `NodeTimeoutError`; every answer of the step is lost. A run can
also be asked to stop (``RunControl.request_drain()``, a server shutting down):
LangGraph stops at the next step boundary.

What the task tells its node, and how this module reads it:

- the run's `langgraph.runtime.Runtime`, in ``config["configurable"]["__pregel_runtime"]``
  (what `get_runtime()` reads): its public ``control.drain_requested`` (`draining`), its
  public ``heartbeat()`` (LangGraph's own progress signal, a no-op unless the attempt
  has an `idle_timeout`) and ``execution_info.node_first_attempt_time``;
- the attempt's `TimeoutPolicy`. No public API hands it to the node: it is the public
  ``timeout`` field of the task (`PregelExecutableTask`), which the node reaches through
  ``config["configurable"]["__pregel_call"]`` (LangGraph's private `call` hook: a
  ``functools.partial`` whose first argument is a weak reference to the task, wrapped
  by the guard of a timed attempt). Where that shape is not found (another LangGraph),
  `node_run` finds no timeout: calls then keep their own deadlines only, as before.
  ``tests/test_node_timeouts.py`` pins the shape against the installed LangGraph.

The time left is measured from the attempt's start: when its first call asks (each
timed attempt has a guard object of its own, under which its `NodeRun` is kept for the
attempt's other calls: `_SEEN`), or, for a node's first attempt, LangGraph's own
``node_first_attempt_time`` when earlier.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from langgraph.types import PregelExecutableTask

_RUNTIME = "__pregel_runtime"
_CALL = "__pregel_call"

MARGIN_S = (0.25, 1.0)
"""The time kept back before the node's `run_timeout` to write the answers: a tenth of
the run timeout, at least 0.25 s and at most 1 s (never more than half of it)."""


@dataclass(frozen=True, slots=True)
class NodeRun:
    """The timed LangGraph attempt a call runs in."""

    run_timeout: float | None
    """The attempt's hard cap, in seconds (`TimeoutPolicy.run_timeout`), or `None`."""
    idle_timeout: float | None
    """Seconds the attempt may go without progress (`TimeoutPolicy.idle_timeout`), or `None`."""
    ends_at: float | None
    """`time.monotonic` time at which LangGraph cancels the attempt (`run_timeout`), or `None`."""
    heartbeat: Callable[[], None] | None
    """``runtime.heartbeat`` when the attempt has an `idle_timeout` (else `None`: never
    called, it would do nothing)."""

    @property
    def answer_by(self) -> float | None:
        """`time.monotonic` time by which the node's calls must be answered: `ends_at`
        less the margin to write the answers (`MARGIN_S`)."""
        if self.ends_at is None or self.run_timeout is None:
            return None
        low, high = MARGIN_S
        margin = min(high, max(low, self.run_timeout / 10), self.run_timeout / 2)
        return self.ends_at - margin


_SEEN: weakref.WeakKeyDictionary[Any, NodeRun] = weakref.WeakKeyDictionary()
"""The `NodeRun` of each timed attempt, by its guard (every call of it shares one)."""
_lock = threading.Lock()


def graph_runtime(config: Any) -> Any:
    """The LangGraph `Runtime` of the run `config` belongs to, or `None` outside a graph."""
    if not config:
        return None
    return (config.get("configurable") or {}).get(_RUNTIME)


def draining(config: Any) -> bool:
    """Whether the run `config` belongs to was asked to drain (``RunControl.request_drain()``)."""
    runtime = graph_runtime(config)
    return runtime is not None and getattr(runtime, "drain_requested", False) is True


def _seconds(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _task_of(found: Any) -> PregelExecutableTask | None:
    """The task behind LangGraph's `call` hook: the hook itself (a partial over a weak
    reference to the task), or the guard of a timed attempt around it."""
    if not isinstance(found, functools.partial):
        inner = None
        for cell in getattr(found, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                if isinstance(cell.cell_contents, functools.partial):
                    inner = cell.cell_contents
                    break
        if inner is None:
            return None
        found = inner
    ref = found.args[0] if found.args else None
    task = ref() if isinstance(ref, weakref.ref) else None
    return task if isinstance(task, PregelExecutableTask) else None


def node_run(config: Any) -> NodeRun | None:
    """The timed LangGraph attempt `config` belongs to, or `None` (no graph, no timeout)."""
    if not config:
        return None
    conf = config.get("configurable")
    found = conf.get(_CALL) if conf else None
    if found is None:
        return None
    guarded = not isinstance(found, functools.partial)  # a timed attempt's guard
    if guarded:
        seen = _SEEN.get(found)
        if seen is not None:
            return seen
    task = _task_of(found)
    policy = None if task is None else task.timeout
    if policy is None:
        return None
    node = _measured(policy, conf.get(_RUNTIME))
    if guarded:
        with _lock, contextlib.suppress(TypeError):  # not weakly referable: measured again
            node = _SEEN.setdefault(found, node)  # the first call of the attempt measured it
    return node


def _measured(policy: Any, runtime: Any) -> NodeRun:
    """The attempt timed by `policy`, measured from now (see the module)."""
    run_timeout = _seconds(policy.run_timeout)
    idle_timeout = _seconds(policy.idle_timeout)
    ends_at = None
    if run_timeout is not None:
        ends_at = _started(runtime) + run_timeout
    beat = getattr(runtime, "heartbeat", None) if idle_timeout is not None else None
    return NodeRun(run_timeout, idle_timeout, ends_at, beat if callable(beat) else None)


def _started(runtime: Any) -> float:
    """When the attempt started (`time.monotonic`): now, or LangGraph's
    ``node_first_attempt_time`` for a node's first attempt, when earlier."""
    now = time.monotonic()
    info = getattr(runtime, "execution_info", None)
    first = getattr(info, "node_first_attempt_time", None)
    if getattr(info, "node_attempt", None) == 1 and isinstance(first, float):
        ago = time.time() - first
        if 0 <= ago < 3600:  # a wall clock that jumped is not believed
            return now - ago
    return now
