"""What the policy's callables receive, and the words its options are spelt with.

Data handed to a user's callable (a key builder, a verifier, a cache key) is a frozen,
slotted dataclass; the vocabularies (`DedupMode`, `CacheScope`, ...) are documented type
aliases. Both are re-exported by `core.policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class IdempotencyInfo:
    """What a key-building callable (``ToolPolicy(idempotency_key=fn)``) receives."""

    tool_name: str
    args: Mapping[str, Any]
    """The model's arguments (after repair), without injected ones."""
    thread_id: str | None
    """``config["configurable"]["thread_id"]`` of the run, if any."""
    tool_call_id: str
    """The id of the tool call in the ``AIMessage`` (persisted in checkpoints). Models
    reuse ids (``call_0`` in every turn): a key that must tell two turns apart includes
    `position`."""
    position: str | None = None
    """Where the call was issued in its run (`core.resume.position`): in a thread of a
    graph with a checkpointer, its step (``tools@3``: the same when a run resumes the
    step, later for a new turn); in a graph without one, its graph task (new in every
    run); `None` outside a graph."""


KeyBuilder = Callable[[IdempotencyInfo], str]
"""Builds the idempotency key of one call; must be deterministic for a resume to work."""


@dataclass(frozen=True, slots=True)
class VerifyInfo:
    """What an ``UnknownOutcome(verify=fn)`` callable receives about a write whose
    outcome is unknown (it timed out or lost its connection after it was sent)."""

    tool_name: str
    args: Mapping[str, Any]
    """The model's arguments (after repair), without injected ones."""
    idempotency_key: str
    """The call's idempotency key (the one a tool taking keys was given)."""
    tool_call_id: str
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class CacheKeyInfo:
    """What a ``Cache(key=fn)`` callable receives: everything a tool call can be told
    apart by, so that the key can name whose result it is."""

    tool_name: str
    args: Mapping[str, Any]
    """The model's arguments (after repair), without injected ones."""
    thread_id: str | None
    """``config["configurable"]["thread_id"]`` of the run, if any."""
    context: Any
    """LangGraph's runtime context of the run (``context_schema``), if any."""
    configurable: Mapping[str, Any]
    """The run's ``config["configurable"]`` without LangGraph's own per-step keys."""
    state: Any
    """The graph state the call came with, if any."""


CacheKeyBuilder = Callable[[CacheKeyInfo], Any]
"""Says which results a call may be served: calls with equal values share results
(within `Cache.scope`). Any JSON-like value; it is digested, never stored."""

CacheScope = Literal["thread", "global"]
"""Who may be served a result kept by the cache or the stale fallback: the calls of the
same conversation thread, or every caller of the adapter (or of its shared store)."""

Verifier = Callable[[VerifyInfo], Any]
"""Looks a write up: returns its result if it happened, `None` if it did not (may be
``async def``); raising, or not answering within ``verify_timeout``, means "unknown"."""

DedupMode = Literal["reuse", "block", "warn", "off"]
"""What happens when the same call is made again (see `Dedup.mode`)."""

LowQualityAction = Literal["retry", "feedback", "rollback"]
"""What happens when a result check flags a successful but useless result."""

RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""Exception types to retry, or a predicate over the exception the tool raised."""

FallbackSource = Literal["stale_cache", "fallback"]
"""A source of the fallback chain: the last good result, or the policy's `fallback`."""

UnknownOutcomeAction = Literal["answer", "interrupt"]
"""What happens to a write whose outcome stays unknown: tell the model, or ask a person."""
