"""Dedup decisions: what to do with a call that was made before. No I/O here.

A `Ledger` remembers, per tool, the calls an adapter has seen (bounded in time and
size by a cachetools `TTLCache`). `decide` maps (mode, idempotency, earlier entry) to
one `Action`. Entries also have a plain-dict form, written to graph state so that dedup
survives checkpoints and restarts (see `state.graph.LEDGER_KEY`).
"""

from __future__ import annotations

import concurrent.futures
import enum
import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cachetools import TTLCache
from langchain_core.messages import AIMessage

from ...core.call import Call
from ...core.key import canonical, canonical_text
from ...core.policy import DedupMode

Status = Literal["pending", "ok", "done", "failed", "unknown_outcome"]
"""``pending`` runs now; ``ok`` succeeded (content reusable); ``done`` succeeded but its
result cannot be replayed (a `Command`); ``failed`` failed; ``unknown_outcome`` is a
write that may or may not have taken effect."""


class Action(enum.Enum):
    RUN = "run"
    """Execute (first call, a failed earlier call, or mode ``off``)."""
    WARN = "warn"
    """Execute, and tell the model it asked this before."""
    REUSE = "reuse"
    """Answer with the earlier result, not executed."""
    BLOCK = "block"
    """Answer ``duplicate_call``."""
    WAIT = "wait"
    """An identical idempotent call is running: wait for it, then decide again."""
    RESEND = "resend"
    """A write whose earlier identical call's outcome was unknown, and the model was told
    so, sent again by the model (a new call, after it checked, as the answer advised):
    it runs, with the earlier call's idempotency key, so a service that honours keys
    carries it out once."""
    REPLAY = "replay"
    """The same tool call again (a resume re-runs the step): its own result, unmarked,
    or for a write whose outcome was unknown, that again."""


@dataclass(slots=True)
class Entry:
    """What the ledger knows about one call key."""

    status: Status
    content: Any = None
    """The earlier result as message content (``ok`` entries only)."""
    repeats: int = 0
    """How many times the call was repeated after the first."""
    at: float = 0.0
    """When the entry was made (the ledger clock, wall time by default)."""
    call_id: str = ""
    """The tool call that made the entry: the same id again is a re-run (a resume from
    a checkpoint), answered with what that call returned, not as a repeat."""
    done: concurrent.futures.Future[None] | None = field(default=None, repr=False)
    """Resolved when a ``pending`` call finishes (in memory only)."""
    step: str | None = field(default=None, repr=False)
    """The step of the call that made the entry (`Call.step`; in memory only)."""
    pos: str | None = None
    """Where the call that made the entry was issued (`core.resume.position`), if known:
    a call with the same id issued elsewhere (a later turn reusing ``call_0``) is another
    call, not a re-run of this one."""
    late: concurrent.futures.Future[None] | None = field(default=None, repr=False)
    """For an ``unknown_outcome`` entry of a write whose attempt timed out while its
    thread ran on: resolved when that attempt ends (in memory only). A re-send waits for
    it: if it took effect the entry became ``ok`` (`landed`), and the re-send is blocked."""
    landed: bool = False
    """The entry is ``ok`` because an attempt that had timed out took effect after all
    (the model was told ``unknown_outcome``): the first repeat, a re-send, is answered
    with its result (`told` is `False` until then), later ones are blocked."""
    told: bool = True
    """For an ``unknown_outcome`` entry: the model was told the outcome is unknown (the
    call's own answer, or a blocked repeat's), so a repeat it sends now is a deliberate
    re-send (`Action.RESEND`). `False` for a write cut short or orphaned by a dead
    worker, which nobody told the model about: its first repeat is blocked, and told."""

    def persisted(self, tool: str) -> dict[str, Any]:
        """The plain-dict form kept in graph state (which leaves ``content`` out where
        the message answering `call_id` holds it, see `pipeline.dedup.stage.state_form`)."""
        return {
            "tool": tool,
            "status": self.status,
            "content": self.content,
            "repeats": self.repeats,
            "at": self.at,
            "call_id": self.call_id,
            **({"pos": self.pos} if self.pos else {}),
            **({} if self.told else {"told": False}),
            **({"landed": True} if self.landed else {}),
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> Entry | None:
        """The entry stored by `persisted`, or `None` if `data` is not one."""
        status = data.get("status")
        if status not in ("ok", "done", "failed", "unknown_outcome"):
            return None
        return cls(
            status=status,
            content=data.get("content"),
            repeats=int(data.get("repeats") or 0),
            at=float(data.get("at") or 0.0),
            call_id=str(data.get("call_id") or ""),
            pos=data.get("pos") or None,
            told=data.get("told") is not False,
            landed=data.get("landed") is True,
        )

    def made_by(self, call_id: str, pos: str | None) -> bool:
        """Whether the call `call_id`, issued at `pos`, is the one that made this entry
        (run again: a resume re-runs its step): the same id, issued at the same place
        when both places are known."""
        if not call_id or self.call_id != call_id:
            return False
        return self.pos is None or pos is None or self.pos == pos


def age_of(entry: Entry, now: float) -> float | None:
    """How long before `now` (the ledger clock) the call that made `entry` was made;
    `None` for an entry that does not say (kept in graph state by an older version)."""
    return max(0.0, now - entry.at) if entry.at > 0 else None


def scope_of(call: Call) -> str | None:
    """Who shares a ledger: one conversation thread, else one step or model message.

    Without a thread id a graph may be serving many users, so dedup never reaches past
    the step that ran the call as its adapter knows it (`Call.step`: one run of a
    node's step, an agent turn's AIMessage, the graph task of a wrapped tool), else the
    AIMessage that made it. An AIMessage without an id is known by its tool call ids,
    so that twins in it are decided as in a graph. With neither, dedup is off. Within
    a scope the key (`core.key.call_key`) still tells the callers apart.
    """
    if call.thread_id:
        return f"thread:{call.thread_id}"
    if call.step:
        return f"step:{call.step}"
    state = call.state
    messages = state.get("messages") if isinstance(state, Mapping) else state
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                if message.id:
                    return f"message:{message.id}"
                ids = [str(tc["id"]) for tc in message.tool_calls if tc.get("id")]
                if ids:
                    return "calls:" + "\x1f".join(ids)
                break
    return None


def effective_mode(mode: DedupMode | None, idempotent: bool) -> DedupMode:
    """`ToolPolicy.dedup` with `None` resolved: reuse reads, block writes."""
    if mode is not None:
        return mode
    return "reuse" if idempotent else "block"


def decide(
    mode: DedupMode, idempotent: bool, entry: Entry | None, call_id: str = "",
    pos: str | None = None, *, here: bool = True,
) -> Action:  # fmt: skip
    """The action for call `call_id` (issued at `pos`) whose earlier identical call is
    `entry` (if any). `here`: the entry is this process's, where a call may wait for
    another; a write that runs in another worker now is blocked instead."""
    if mode == "off" or entry is None or entry.status == "failed":
        return Action.RUN
    if entry.made_by(call_id, pos):
        if entry.status == "pending":  # this very call still runs (a step re-run early)
            return Action.WAIT if here or idempotent else Action.BLOCK
        if entry.status in ("ok", "unknown_outcome"):
            return Action.REPLAY
    if entry.status == "pending":
        return Action.WAIT if idempotent else Action.BLOCK
    if entry.status == "unknown_outcome":
        if idempotent:
            return Action.RUN
        return Action.RESEND if entry.told else Action.BLOCK
    if mode == "warn":
        return Action.WARN
    if mode == "block":  # a write that took effect after all: its first repeat gets it
        return Action.REUSE if entry.landed and not entry.told else Action.BLOCK
    # reuse
    if entry.status == "ok":
        return Action.REUSE
    return Action.RUN if idempotent else Action.BLOCK


def resent(action: Action, earlier: Entry | None) -> Entry | None:
    """The entry whose call a ``RESEND`` sends again (its idempotency key is reused)."""
    return earlier if action is Action.RESEND else None


def landing(action: Action, entry: Entry | None) -> bool:
    """Whether a re-send must wait: the earlier attempt, timed out, still runs."""
    late = entry.late if entry is not None and action is Action.RESEND else None
    return late is not None and not late.done()


def block_reason(entry: Entry) -> str:
    """The `DuplicateCall.reason` for blocking a repeat of `entry`."""
    if entry.status == "pending" or (entry.late is not None and not entry.late.done()):
        return "in_flight"
    if entry.landed:
        return "landed"
    if entry.status == "unknown_outcome":
        return "unknown_outcome"
    return "done"


def first_twins(calls: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each tool call, the index of the first earlier call with the same name and
    (canonical) arguments, else `None`. Adapters run a twin after its original, so that
    the first of identical calls in one message is the one that runs."""
    if len(calls) < 2:  # one call has no twin (most steps: skip its key)
        return [None] * len(calls)
    seen: dict[Hashable, int] = {}
    out: list[int | None] = []
    for i, tc in enumerate(calls):
        args = tc.get("args")
        if not isinstance(args, dict):
            out.append(None)
            continue
        first = seen.setdefault(_twin_key(tc.get("name"), args), i)  # the key hashed once
        out.append(None if first == i else first)
    return out


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _twin_key(name: Any, args: dict[str, Any]) -> Hashable:
    """The identity of a call for `first_twins`: as `canonical` sees it. Flat arguments
    (the usual kind) become a tuple directly, a string as `canonical` writes it (its
    words, one space apart); anything nested goes through JSON."""
    items: list[tuple[str, type, Any]] = []
    for key, value in args.items():
        kind = type(value)
        if kind is str:
            value = canonical_text(value)
        elif kind not in _SCALARS or type(key) is not str:
            return json.dumps([name, canonical(args)], sort_keys=True, default=str)
        # The type is part of the value, as in JSON: 1, 1.0 and true are not twins.
        items.append((key, kind, value))
    items.sort()  # by name: names are unique, so nothing else is ever compared
    return (name, tuple(items))


class Ledger:
    """Calls seen per (scope, key), for one tool; bounded by TTL and size."""

    __slots__ = ("_cache", "clock", "ttl")

    def __init__(
        self, *, ttl: float, max_entries: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.ttl = ttl
        self.clock = clock
        self._cache: TTLCache[Hashable, Entry] = TTLCache(max_entries, ttl, timer=clock)

    def get(self, key: Hashable) -> Entry | None:
        return self._cache.get(key)

    def put(self, key: Hashable, entry: Entry) -> None:
        self._cache[key] = entry

    def pop(self, key: Hashable) -> None:
        self._cache.pop(key, None)

    def fresh(self, entry: Entry) -> bool:
        """Whether a restored entry is still within the TTL."""
        return self.clock() - entry.at < self.ttl

    def __len__(self) -> int:
        return len(self._cache)
