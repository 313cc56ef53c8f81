"""Drain: no write starts once the run is asked to stop.

A write's attempt is the last thing before the tool (`driver.STAGES`: inside the
limits, so a write that waited for a slot is asked too). Once the run is asked to drain
(`runtime.drain`), it is answered `Drained` instead of started: nothing was done, and
the same call sent again after the resume runs once. Everything further out keeps its
meaning: a journal receipt still answers a resumed call (it ran before; the journal
drops the entry of a write that was refused here), dedup does not count a refused write
as done, the breaker does not count it at all. Reads are not stopped: an attempt that
starts is one the retry and hedge stages let start (they refuse new ones themselves).
"""

from __future__ import annotations

from ..core.call import Call
from ..core.policy import ResolvedPolicy
from ..runtime import drain as _drain
from .stage import BeforeStage


def hold_writes(call: Call) -> None:
    """Refuse `call`, a write, when its run is draining (`Drained`, not started)."""
    if _drain.draining(call):
        _drain.refuse(call, "write")


class DrainStage(BeforeStage):
    name = "drain"
    before = staticmethod(hold_writes)

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return resolved.write
