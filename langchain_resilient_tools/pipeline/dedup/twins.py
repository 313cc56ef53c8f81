"""Identical calls in one step are one logical call (DESIGN.md, invariant 8).

The adapters that see a step's AIMessage know which of its calls are identical
(`StepTwins`, made with `first_twins`): the first in the message's order *leads*, the
others *follow* it (`Call.twin_of`). In the dedup stage a leader runs for its group, and
each follower waits for it, whatever order the threads or the event loop start them
in, then takes its share of the one outcome (`Share`):

- a failure, or an answer that a fallback made, is shared as it is: one chain of
  attempts, one outcome, each twin answered under its own tool call id;
- a result the ledger keeps is answered by the ledger's usual rule (a read reuses it,
  a write is blocked, showing it), which also counts the repeat (`Share` is `None`);
- so is anything else: a write whose outcome is unknown (blocked, never asked twice),
  a `Command`, a call cut short, or LangGraph control flow (an interrupt).

A wrapped tool in a plain `ToolNode` cannot see its AIMessage: there the first of
identical calls of a graph step to arrive leads. Groups are kept per (tool, step, call
key) in a small bounded map, since a follower may arrive after its leader has settled
(`ResilientToolNode` starts a follower once its leader is done, before it takes a slot
of ``max_concurrency``). Decisions here are pure but for the group's lock and future.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from langchain_core.messages import ToolMessage

from ...core.call import Call
from ...core.errors import HandledByTool, ToolRaised
from ...core.tools import INVALID_KEY
from .logic import first_twins

MAX_GROUPS = 1024
"""Groups of identical calls remembered per dedup stage (the least recent go first)."""
ARRIVAL_S = 2.0
"""How long a follower waits for its leader to reach the dedup stage at all (it starts
with it); a leader that never comes (refused before dedup, or held back by something
outside the pipeline) leaves the follower to the ledger's decision after this."""


@dataclass(frozen=True, slots=True)
class StepTwins:
    """Which calls of one step are identical, as an adapter that sees the step knows it."""

    step: str
    """The step's identity: the groups of its twins are told apart from other steps'."""
    twin_of: Mapping[str, str] = field(default_factory=dict)
    """Each follower's call id -> the id of the first identical call (its leader)."""
    grouped: frozenset[str] = frozenset()
    """The ids of every call that has an identical sibling (leaders and followers)."""
    firsts: tuple[int | None, ...] = ()
    """For each call, the index of the first identical call before it (`first_twins`)."""

    @classmethod
    def of(cls, calls: Sequence[Mapping[str, Any]], step: str) -> StepTwins:
        """The twins of `calls` (one AIMessage's tool calls, in its order); `step`: the
        step's identity (one run of a node's step has one of its own: `stage.DedupStage.open_step`)."""
        # A call the model could not format has placeholder arguments until it is
        # repaired (or refused): it is nobody's twin.
        firsts = tuple(first_twins([{} if INVALID_KEY in tc else tc for tc in calls]))
        if all(j is None for j in firsts):
            return cls(step, firsts=firsts)
        ids = [str(tc.get("id") or "") for tc in calls]
        repeated = {i for i, n in Counter(ids).items() if n > 1}  # twice: not told apart
        twin_of: dict[str, str] = {}
        grouped: set[str] = set()
        for i, j in enumerate(firsts):
            if j is None or ids[i] in repeated or ids[j] in repeated:
                continue
            twin_of[ids[i]] = ids[j]
            grouped.update((ids[i], ids[j]))
        return cls(step, twin_of, frozenset(grouped), firsts)

    def place(self, call: Call) -> None:
        """Mark `call` (one of this step's) with its step, leader and twinlessness."""
        call.step = self.step
        call.twin_of = self.twin_of.get(call.id)
        call.twinless = call.id not in self.grouped


@dataclass(frozen=True, slots=True)
class Share:
    """A follower's share of its leader's outcome: the same failure, or the same answer
    that was not the tool's own (a fallback's, with its notices)."""

    exc: Exception | None = None
    value: Any = None
    served_by: str = "dedup"
    notices: tuple[str, ...] = ()

    def answer(self, call: Call) -> Any:
        """`call`'s answer (raised, for a failure): the leader's, under `call`'s id."""
        record = call.record
        record.served_by = self.served_by
        record.notices.extend(self.notices)
        if self.exc is not None:
            raise _for_call(self.exc, call)
        if isinstance(self.value, ToolMessage):
            return self.value.model_copy(update={"tool_call_id": call.id})
        return self.value


def _for_call(exc: Exception, call: Call) -> Exception:
    """`exc` as `call`'s own: a tool's own error answer is re-addressed to `call`."""
    original = exc.original if isinstance(exc, ToolRaised) else None
    if isinstance(original, HandledByTool):
        answer = original.answer.model_copy(update={"tool_call_id": call.id})
        return ToolRaised(HandledByTool(str(original), answer))
    return exc


class Group:
    """The identical calls of one step: who runs, and the outcome once it is settled."""

    __slots__ = ("done", "leader", "share")

    def __init__(self, leader: str | None) -> None:
        self.leader = leader
        """The id of the call that runs for the group (`None`: not arrived yet)."""
        self.share: Share | None = None
        """What followers take once `done` (`None`: the ledger decides for them)."""
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()

    @property
    def settled(self) -> bool:
        return self.done.done()

    def wait(self, limit: float) -> None:
        """Block until the leader settles: at most `ARRIVAL_S` for it to arrive, then
        at most `limit` (its whole budget) for it to finish."""
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self.done.result(timeout=min(ARRIVAL_S, limit))
        if not self.settled and self.leader is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                self.done.result(timeout=limit)

    async def await_(self, limit: float) -> None:
        """`wait`, on an event loop."""
        done = asyncio.wrap_future(self.done)
        await asyncio.wait({done}, timeout=min(ARRIVAL_S, limit))
        if not self.settled and self.leader is not None:
            await asyncio.wait({done}, timeout=limit)

    def settle(self, share: Share | None) -> None:
        """The leader is done: wake the followers (once; later calls do nothing)."""
        if not self.done.done():
            self.share = share
            self.done.set_result(None)


class Twins:
    """The groups of identical calls a dedup stage has seen (bounded, thread-safe)."""

    __slots__ = ("_groups", "_lock")

    def __init__(self, max_groups: int = MAX_GROUPS) -> None:
        self._lock = threading.Lock()
        self._groups: LRUCache[Hashable, Group] = LRUCache(max_groups)

    def join(self, call: Call, key: str) -> tuple[Group, bool] | None:
        """`call`'s group and whether `call` runs for it; `None` when its step is unknown.

        A follower (`Call.twin_of`) never runs for its group. Any other call runs for
        a group nobody runs for yet; a call that led a settled group and comes again
        (its step is run again, e.g. on a resume) starts a new one.
        """
        if call.step is None:
            return None
        gkey = (call.name, call.step, key)
        with self._lock:
            group = self._groups.get(gkey)
            if call.twin_of is not None:
                if group is None:
                    group = self._groups[gkey] = Group(None)
                return group, False
            if group is None or (group.settled and group.leader == call.id):
                group = self._groups[gkey] = Group(call.id)
                return group, True
            if group.leader is None:  # its followers arrived first
                group.leader = call.id
                return group, True
            return group, False

    def __len__(self) -> int:
        return len(self._groups)
