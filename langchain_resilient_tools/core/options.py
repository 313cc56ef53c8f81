"""The option groups of `ToolPolicy`, one per strategy, in `STAGES` order.

Each group is a frozen, keyword-only `Options` model with a docstring on every field;
``ToolPolicy(dedup=Dedup(ttl_s=60))`` sets one field of one group. Groups with a main
field take a shorthand for it (``dedup="block"``, ``journal=False``,
``unknown_outcome="interrupt"``; ``cache=60``, ``fallback=data`` in `core.reuse`;
``retry=3``, ``hedge="auto"`` in `core.strategies`),
and a per-tool policy changes only the fields of a group it sets explicitly
(`core.policy.overlay`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.rate_limiters import BaseRateLimiter
from pydantic import Field, field_validator, model_validator

from .errors import UsageError
from .frozen import Options
from .hooks import (
    DedupMode,
    LowQualityAction,
    UnknownOutcomeAction,
    Verifier,
)
from .strategies import AdaptiveTimeout


class Args(Options):
    """Repair of the model's arguments (`pipeline.repair`, `pipeline.validate`)."""

    aliases: Mapping[str, Sequence[str]] = Field(default_factory=dict)
    """``{"canonical_arg": ["wrong_name", ...]}``: argument names the model may use instead."""
    unknown: Literal["reject", "drop"] = "reject"
    """Arguments the tool's schema does not know (after name repair): ``"reject"``
    answers ``invalid_arguments`` listing each as ``unexpected``; ``"drop"`` removes
    them and tells the model so (a repair). A schema that allows extra keys keeps them
    either way."""

    @field_validator("aliases")
    @classmethod
    def _check_aliases(cls, v: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
        seen: dict[str, str] = {}
        out: dict[str, tuple[str, ...]] = {}
        for canonical, names in v.items():
            if isinstance(names, str):
                names = (names,)
            for alias in names:
                if alias == canonical:
                    raise UsageError(f"alias {alias!r} is the canonical name itself")
                if alias in seen and seen[alias] != canonical:
                    raise UsageError(
                        f"alias {alias!r} is given for {seen[alias]!r} and {canonical!r}"
                    )
                seen[alias] = canonical
            out[canonical] = tuple(names)
        return out


class Journal(Options):
    """The durable journal of writes (`pipeline.journal`); shorthand ``journal=False``."""

    enabled: bool = True
    """Writes only (tools that are not idempotent, keyed writes included): keep a durable
    journal of each call, so that a worker that dies mid-call never makes the write run
    again silently. Before the write runs its intent is recorded (idempotency key, tool,
    a digest of the arguments, owner, lease); when it answers, its receipt. On resume a
    call with a receipt is answered from it; one whose worker is gone goes to
    `UnknownOutcome.verify`, then `UnknownOutcome.action`. Kept in the adapter's
    ``store=``, else the graph's store, else the checkpointer's own database (SQLite or
    Postgres). `False` turns it off for this tool."""
    ttl_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """Seconds a journal entry is kept (7 days: longer than a resume after a crash or a
    person's answer to an interrupt usually takes; the tool call id, which the key is
    made of, is never sent again after that)."""
    lease_s: float = Field(default=10.0, gt=0)
    """Seconds a running write's lease lasts; its worker renews it every third of that.
    A worker on another host whose lease ran out is taken for dead (one on the same host
    is seen as dead at once, by its process id)."""

    @classmethod
    def coerce(cls, value: Any) -> Any:
        return cls(enabled=value) if isinstance(value, bool) else super().coerce(value)

    def __bool__(self) -> bool:  # ``if policy.journal:`` was the old bool: never a silent True
        raise TypeError("a Journal is not a bool: read its `enabled` (the old ToolPolicy.journal)")


class Dedup(Options):
    """Repeated identical calls (`pipeline.dedup`); shorthand ``dedup="block"`` (the mode)."""

    mode: DedupMode | None = None
    """What a repeated identical call gets: ``"reuse"`` the earlier answer, ``"block"`` a
    ``duplicate_call`` error, ``"warn"`` a run with a notice, ``"off"`` a plain run.
    `None`: reuse for idempotent tools, block for others."""
    key: Sequence[str] | Callable[[dict[str, Any]], Any] | None = None
    """What makes two calls "the same": `None` uses every argument; a list of argument
    names uses only those; a callable ``(args) -> value`` computes the key itself."""
    ttl_s: float = Field(default=600.0, gt=0)
    """Seconds an earlier call is remembered."""
    max_entries: int = Field(default=1024, ge=1)
    """Calls remembered per tool (per adapter); the oldest are forgotten first."""
    looping_after: int = Field(default=2, ge=1)
    """Repeats of one call after which the model is told it is going in circles."""

    @field_validator("key", mode="before")
    @classmethod
    def _check_key(cls, v: Any) -> Any:
        if v is None or callable(v):
            return v
        names = (v,) if isinstance(v, str) else tuple(v)
        if not names or not all(isinstance(n, str) for n in names):
            raise UsageError("Dedup.key takes argument names or a callable")
        return names

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return cls.model_validate({"mode": value})
        return super().coerce(value)


class UnknownOutcome(Options):
    """A write whose outcome is unknown: it timed out, or lost its connection, after it
    was sent (`pipeline.verify`, `adapters.review`). Shorthand
    ``unknown_outcome="interrupt"`` (`action`)."""

    verify: Verifier | None = None
    """Look the write up instead of guessing. The callable gets a `VerifyInfo` and
    returns the write's result if it happened (the call is answered with it, marked as
    verified), or `None` if it did not (the call is run once more, with the same
    idempotency key; not after a timeout, whose attempt may still be running). If it
    raises or does not answer within `verify_timeout`, `action` applies. A write is never
    run more than twice: once, and once more after a lookup that found nothing."""
    verify_timeout: float = Field(default=5.0, gt=0)
    """Seconds the `verify` lookup may take."""
    check: str | None = None
    """The read tool that shows whether this write took effect, named in the
    ``unknown_outcome`` envelope (``"check"``) with the write's values for the
    parameters it takes, so the model checks before it sends the write again. `None`:
    the node or middleware finds one among its tools, by parameters and name
    (`pipeline.lookups`), or names none."""
    action: UnknownOutcomeAction = "answer"
    """For a write whose outcome stays unknown (after `verify`, if any): ``"answer"``
    tells the model (``unknown_outcome``); ``"interrupt"`` asks a person first, with a
    LangGraph ``interrupt()`` whose value is an `OutcomeReview` and whose resume value
    is a `HumanDecision` (run it again, it was done, or give up); the model is then
    told what the person decided. ``"interrupt"`` works in `ResilientToolNode` and
    `ResilientToolsMiddleware` in a graph with a checkpointer (it raises `UsageError`
    without one); sibling calls of the step are not run again on resume."""

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if isinstance(value, str):
            return cls.model_validate({"action": value})
        return super().coerce(value)


class ResultChecks(Options):
    """Checks of successful results (`pipeline.checks`)."""

    checks: Sequence[Callable[[Any], str | None]] = ()
    """Callables that return a reason (str) when a successful result is useless, else
    `None` (built-in ones in `langchain_resilient_tools.checks`)."""
    on_low_quality: LowQualityAction = "feedback"
    """What to do when a check fires: ``"retry"`` (idempotent tools), ``"feedback"``
    (answer the result with the reason), ``"rollback"`` (drop the step's messages and
    let the model try again; in a graph)."""
    max_rollbacks: int = Field(default=2, ge=0)
    """Rollbacks in a row (counted in graph state) before ``"rollback"`` degrades to
    ``"feedback"``."""
    detect_error_text: bool = True
    """Treat an answer whose whole text reads as an error report (``Error: ...``,
    ``Database error: ...``: how the MCP reference servers answer some failures, without
    ``isError``) as a ``tool_error``, after the `checks` (a result they flag gets
    `on_low_quality`). `False`: every returned text is a success."""

    @field_validator("checks")
    @classmethod
    def _check_checks(cls, v: Sequence[Any]) -> tuple[Any, ...]:
        if not all(callable(c) for c in v):
            raise UsageError("result checks must be callables")
        return tuple(v)


class Limits(Options):
    """How many attempts of a tool run at once and per second (`pipeline.limit`).

    Per adapter by default; across every worker when the tool's state is shared
    (`Shared`) in a store that can decide limits atomically (`MemoryBackend`,
    ``PostgresStore``, Redis, SQLite: `state.limits`); on any other store they stay per
    process, which the tool's first call says once (an `IgnoredOptionWarning`)."""

    max_concurrency: int | None = Field(default=None, ge=1)
    """At most this many attempts of this tool run at once (per adapter, or across
    workers when shared); the others wait for a slot, and the wait counts against the
    call's deadline (`None`: no limit)."""
    rate_limit: float | BaseRateLimiter | None = None
    """At most this many attempts per second (langchain-core's `InMemoryRateLimiter`
    per adapter, a token bucket in the store when shared), or a `BaseRateLimiter` of
    your own (share one between tools to limit them together; it stays what it is, per
    process, when the state is shared). The wait counts against the call's deadline
    (`None`: no limit)."""
    burst: int = Field(default=1, ge=1)
    """Attempts that may start at once after a quiet spell, beyond the rate: in any
    ``t`` seconds at most ``rate_limit * t + burst`` start (1: none beyond the rate).
    For a rate in calls per second only."""
    lease_s: float = Field(default=10.0, gt=0)
    """Shared `max_concurrency` only: seconds a slot is held without renewal. Its worker
    renews it every third of that while the attempt runs, so the slots of a worker that
    died come back to the others within `lease_s`."""

    @field_validator("rate_limit")
    @classmethod
    def _check_rate_limit(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
            raise UsageError("rate_limit must be > 0 calls per second, a BaseRateLimiter or None")
        return v

    @model_validator(mode="after")
    def _check_burst(self) -> Limits:
        if self.burst != 1 and not isinstance(self.rate_limit, int | float):
            raise UsageError(
                "Limits.burst applies to a rate_limit in calls per second; "
                f"rate_limit is {self.rate_limit!r}"
            )
        return self


class Timeouts(Options):
    """Time beyond one attempt's `ToolPolicy.timeout`: the whole call's deadline, an
    adaptive timeout, and what happens to attempts that did not stop at theirs."""

    deadline: float | Literal["auto"] | None = "auto"
    """Seconds the whole call (every attempt and wait) may take; caps each attempt's
    timeout and each backoff wait. ``"auto"`` (the default) is ``2 * timeout + 1`` s
    (61 s with the default `timeout`), so a user who sets only `timeout` gets an answer
    within that; with ``timeout=None`` it is unbounded. `None` turns it off. A run-wide
    deadline can also be passed as an absolute `clock` time in
    ``config["configurable"]["lrt_deadline"]``; the earlier one wins."""
    adaptive: AdaptiveTimeout | None = None
    """Derive the attempt timeout from this tool's latency history, starting from
    `ToolPolicy.timeout`."""
    max_abandoned_threads: int = Field(default=4, ge=1)
    """Timed-out sync calls of this tool that may still be running before new calls fail
    fast, so that one hung tool cannot take every worker thread."""
    isolate: bool = False
    """Run each attempt of this sync tool in a worker process that is killed at the
    timeout. The tool must be picklable (a `StructuredTool` over a module-level function),
    its arguments and result too; injected arguments and wrappers around the tool call
    (``wrap_tool_call``, inner middleware) are not applied in the worker."""

    @field_validator("deadline")
    @classmethod
    def _check_deadline(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, int | float) and v <= 0:
            raise UsageError('Timeouts.deadline must be > 0, "auto" or None')
        return v


class Output(Options):
    """What goes back to the model and the caller."""

    max_chars: int | None = Field(default=None, gt=0)
    """Cap on the characters of a result sent back to the model, or `None`."""
    attach_record: bool = False
    """Attach the per-call record (``response_metadata["resilience"]``) to every answer.
    By default it is attached only when the layer did something (a retry, a repair, a
    reuse, a cache or fallback answer, a cut, an error): a healthy call is answered with
    exactly the message the tool itself gives, as `ToolNode` would. Every call is in
    `stats()`, callbacks and OpenTelemetry either way."""
    expose_error_details: bool = False
    """Development aid: include the (redacted) exception text of unexpected errors."""


class Shared(Options):
    """Where a tool's state (breaker, dedup ledger, caches) lives across workers."""

    backend: Literal["auto", "local", "store"] = "auto"
    """``"auto"``: in the adapter's ``store=`` if one was given, else in-process;
    ``"local"`` always in-process; ``"store"`` in the adapter's ``store=``, else in the
    graph's store (``runtime.store``), else in-process. See `state.backend` for each
    operation's consistency."""
    on_error: Literal["open", "closed"] = "open"
    """When the shared store fails (partition, timeout): ``"open"`` carries on with this
    worker's own state (the breaker and dedup act per worker, so a write sent to two
    workers during the outage may run twice); ``"closed"`` refuses the call with a
    ``transient_failure`` and never runs the tool. Caches always fail open (a miss). The
    write journal never does for a write that must not run twice: when its entry cannot
    be read, whether the write already ran before a restart is unknown, so it is answered
    ``unknown_outcome`` without running (``UnknownOutcome.verify``, under ``"open"``,
    looks it up first); a keyed write, or one safe to repeat, follows this setting."""
