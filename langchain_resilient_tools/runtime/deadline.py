"""Deadline budget: one absolute deadline per call caps every attempt and every wait.

A call's deadline is the earlier of a run-wide one (``config["configurable"]["lrt_deadline"]``,
an absolute time on the policy's `clock`, `time.monotonic` by default) and the call's
own budget (`Timeouts.deadline` from the moment the call starts; by default
``2 * timeout + 1`` s). Layered timeouts
then hold: an attempt never gets more time than the call has left, and neither does a
backoff wait.
"""

from __future__ import annotations

import time
from typing import Any

from ..core.call import Call
from ..core.errors import AttemptTimeout

CONFIG_KEY = "lrt_deadline"
"""``config["configurable"]`` key of a run-wide deadline (absolute `clock` seconds)."""


def deadline_of(config: Any) -> float | None:
    """The run-wide deadline in a `RunnableConfig`, if one was given."""
    if not isinstance(config, dict):
        return None
    value = (config.get("configurable") or {}).get(CONFIG_KEY)
    return float(value) if isinstance(value, (int, float)) else None


def start(call: Call, budget: float | None) -> None:
    """Fix `call.deadline` when the call starts: the earlier of the run's and its own
    (`budget` seconds from now, its policy's `Timeouts.deadline`; `None`: none)."""
    now = call.started = call.resolved.clock()
    if budget is None:
        return
    own = now + budget
    call.deadline = own if call.deadline is None else min(call.deadline, own)


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
