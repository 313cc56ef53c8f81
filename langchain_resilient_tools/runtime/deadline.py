"""Deadline budget: one absolute deadline per call caps every attempt and every wait.

A call's deadline is the earliest of a run-wide one
(``config["configurable"]["lrt_deadline"]``, an absolute time on the policy's `clock`,
`time.monotonic` by default), the call's own budget (`Timeouts.deadline` from the
moment the call starts; by default ``2 * timeout + 1`` s) and, for a call of a LangGraph
node timed with a `TimeoutPolicy` (``add_node(..., timeout=...)``, ``Send(...,
timeout=...)``), the moment its answer must be written for the node to return before
LangGraph cancels it (`runtime.graphnode`: the node's `run_timeout` less a margin).
Layered timeouts then hold: an attempt never gets more time than the call has left, and
neither does a backoff wait; the node's own timeout never takes the step's answers with
it. A node with an `idle_timeout` also hears from its live calls (`runtime.pulse`).
"""

from __future__ import annotations

import time
from typing import Any

from ..core.call import Call
from ..core.errors import AttemptTimeout
from .graphnode import NodeRun, node_run
from .pulse import keep_alive

CONFIG_KEY = "lrt_deadline"
"""``config["configurable"]`` key of a run-wide deadline (absolute `clock` seconds)."""


def deadline_of(config: Any) -> float | None:
    """The run-wide deadline in a `RunnableConfig`, if one was given."""
    if not isinstance(config, dict):
        return None
    value = (config.get("configurable") or {}).get(CONFIG_KEY)
    return float(value) if isinstance(value, (int, float)) else None


def start(call: Call, budget: float | None) -> None:
    """Fix `call.deadline` when the call starts: the earliest of the run's, its own
    (`budget` seconds from now, its policy's `Timeouts.deadline`; `None`: none) and its
    LangGraph node's (`within_node`)."""
    now = call.started = call.resolved.clock()
    if budget is not None:
        own = now + budget
        call.deadline = own if call.deadline is None else min(call.deadline, own)
    node = node_run(call.config)
    if node is not None:
        within_node(call, node, now)


def within_node(call: Call, node: NodeRun, now: float) -> None:
    """`call` runs in a timed LangGraph attempt: answered before the node's run timeout
    (`NodeRun.answer_by`, on the policy's clock), and a pulse for its idle timeout."""
    call.node = node
    answer_by = node.answer_by
    if answer_by is not None:
        by_node = now + (answer_by - time.monotonic())
        if call.deadline is None or by_node < call.deadline:
            call.deadline = by_node
            call.deadline_by_node = True
    if node.heartbeat is not None and node.idle_timeout is not None:
        keep_alive(call, node.heartbeat, node.idle_timeout)


def cut_by_node(call: Call) -> float | None:
    """The node's run timeout, when it set `call`'s deadline and that deadline has
    passed (the call was cut by the node's time limit); else `None`."""
    if not call.deadline_by_node or call.node is None:
        return None
    left = remaining(call)
    return call.node.run_timeout if left is not None and left <= 0 else None


def give_up(call: Call) -> None:
    """What is left of `call`'s deadline is too little to use (a backoff wait would take
    it): the deadline is spent now, as if it had passed (`cut_by_node` then tells the
    model when it was the node's)."""
    call.deadline = call.resolved.clock()


def remaining(call: Call) -> float | None:
    """Seconds left before `call`'s deadline (may be <= 0), or `None` without one."""
    if call.deadline is None:
        return None
    return call.deadline - call.resolved.clock()


def remaining_or_none(call: Call) -> float | None:
    """`remaining`, never below 0 (a wait with this timeout ends at the deadline)."""
    left = remaining(call)
    return None if left is None else max(0.0, left)


def cap(call: Call, seconds: float | None) -> float | None:
    """`seconds` (a timeout, `None` = unbounded) capped to what is left of the deadline.

    Raises `AttemptTimeout` (not started) when nothing is left.
    """
    left = remaining(call)
    if left is None:
        return seconds
    if left <= 0:
        raise AttemptTimeout(round(time.time() - call.record.started_at, 3), started=False)
    return left if seconds is None else min(seconds, left)


def cap_wait(call: Call, seconds: float) -> float:
    """A backoff wait capped to what is left of the deadline (never negative)."""
    left = remaining(call)
    return seconds if left is None else max(0.0, min(seconds, left))


def waited(call: Call) -> float:
    """Seconds since `call` started, on its policy's clock."""
    if call.started is None:
        return 0.0
    return max(0.0, call.resolved.policy.clock() - call.started)
