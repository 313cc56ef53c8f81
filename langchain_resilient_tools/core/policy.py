"""Policies: frozen, keyword-only, validated when built.

`ToolPolicy` says how one tool is protected. `policy=` on an adapter is the default for
every tool and `policies={name: ToolPolicy(...)}` refines it per tool: a per-tool policy
overrides only the fields it sets explicitly (see `PolicyResolver`).
"""

from __future__ import annotations

import difflib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from langchain_core.rate_limiters import BaseRateLimiter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .annotations import AnnotationTrust, ToolHints, classify, hints_of, set_aside
from .errors import UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IdempotencyInfo:
    """What a key-building callable (``ToolPolicy(idempotency_key=fn)``) receives."""

    tool_name: str
    args: Mapping[str, Any]
    """The model's arguments (after repair), without injected ones."""
    thread_id: str | None
    """``config["configurable"]["thread_id"]`` of the run, if any."""
    tool_call_id: str
    """The id of the tool call in the ``AIMessage`` (persisted in checkpoints)."""


KeyBuilder = Callable[[IdempotencyInfo], str]
"""Builds the idempotency key of one call; must be deterministic for a resume to work."""


@dataclass(frozen=True, slots=True)
class VerifyInfo:
    """What a ``ToolPolicy(verify=fn)`` callable receives about a write whose outcome is
    unknown (it timed out or lost its connection after it was sent)."""

    tool_name: str
    args: Mapping[str, Any]
    """The model's arguments (after repair), without injected ones."""
    idempotency_key: str
    """The call's idempotency key (the one a tool taking keys was given)."""
    tool_call_id: str
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class CacheKeyInfo:
    """What a ``ToolPolicy(cache_key=fn)`` callable receives: everything a tool call can
    be told apart by, so that the key can name whose result it is."""

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
(within `ToolPolicy.cache_scope`). Any JSON-like value; it is digested, never stored."""

CacheScope = Literal["thread", "global"]
"""Who may be served a result kept by the cache or the stale fallback: the calls of the
same conversation thread, or every caller of the adapter (or of its shared store)."""


Verifier = Callable[[VerifyInfo], Any]
"""Looks a write up: returns its result if it happened, `None` if it did not (may be
``async def``); raising, or not answering within ``verify_timeout``, means "unknown"."""


DedupMode = Literal["reuse", "block", "warn", "off"]
"""What happens when the same call is made again (see the README's policy reference)."""

LowQualityAction = Literal["retry", "feedback", "rollback"]
"""What happens when a result check flags a successful but useless result."""

RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""Exception types to retry, or a predicate over the exception the tool raised."""

READ_PREFIXES: tuple[str, ...] = (
    "get", "search", "list", "read", "fetch", "find", "lookup", "look_up", "query",
    "describe", "retrieve", "check", "count", "show", "view", "calculate", "compute",
    "estimate", "validate", "explain", "summarize", "translate", "convert", "browse",
    "inspect", "preview", "download", "load", "resolve", "recommend", "lookup",
)  # fmt: skip
"""Tool-name prefixes inferred idempotent when `idempotent=None` (safe to run twice)."""

WRITE_PREFIXES: tuple[str, ...] = (
    "create", "delete", "remove", "send", "book", "update", "insert", "post", "put",
    "patch", "write", "set", "add", "cancel", "pay", "charge", "transfer", "submit",
    "publish", "upload", "execute", "run", "approve", "order", "purchase", "buy",
    "reserve", "refund", "move", "rename", "assign", "schedule", "register", "deploy",
    "email", "notify", "reply", "invite", "close", "open", "start", "stop", "drop",
)  # fmt: skip
"""Tool-name prefixes inferred non-idempotent. Names matching neither list are treated
as non-idempotent too: a tool is retried only when it is known to be safe."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def infer_idempotent(tool_name: str) -> bool:
    """Whether `tool_name` reads as a read-only tool, from `READ_PREFIXES`/`WRITE_PREFIXES`."""
    words = _CAMEL.sub("_", tool_name).lower().replace("-", "_").replace(".", "_").split("_")
    words = [w for w in words if w]
    for n in (2, 1):  # a two-word prefix ("look_up") wins over its first word
        head = "_".join(words[:n])
        if head in WRITE_PREFIXES:
            return False
        if head in READ_PREFIXES:
            return True
    return False


class _Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True
    )


class RetryPolicy(_Frozen):
    """Exponential backoff with jitter, driven by tenacity."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    """Attempts in all, the first call included (1 turns retry off)."""
    initial_delay: float = Field(default=0.5, ge=0)
    """Seconds to wait before the first retry."""
    max_delay: float = Field(default=10.0, ge=0)
    """Upper bound of any single wait, in seconds."""
    multiplier: float = Field(default=2.0, ge=1)
    """Each wait is the previous one times this."""
    jitter: float = Field(default=0.5, ge=0)
    """Up to this many random seconds are added to each wait."""
    retry_on: RetryOn | None = None
    """Exception types, or a predicate, that are worth another attempt. `None` retries
    transient failures: timeouts, connection and OS errors, HTTP 429/5xx, and exceptions
    that carry ``retryable = True``. `ValueError`, `ToolException` and validation errors
    are never retried by default."""
    retry_refused_writes: bool = True
    """Retry a call that is not safe to repeat when its service refused it with a rate
    limit (HTTP 429, or an exception with a retry hint): the service did not act on it,
    so it is not an ``unknown_outcome``. `False`: such calls are never retried."""
    budget_ratio: float | None = Field(default=0.5, ge=0)
    """Retry budget, shared by all calls of one tool: within `budget_window` seconds at
    most ``budget_min + budget_ratio * calls`` retries are made, so a failing service
    does not get a retry storm. `None` turns the budget off. The default, 0.5, lets a
    service failing 30% of calls recover nearly every call while a service that is down
    gets at most 1.5 times its normal load instead of `max_attempts` times."""
    budget_min: int = Field(default=10, ge=0)
    """Retries always allowed per `budget_window`, however few calls were made."""
    budget_window: float = Field(default=10.0, gt=0)
    """Length in seconds of the sliding window the retry budget counts over (in ten
    slices: a call may be forgotten up to a tenth of the window early)."""

    @model_validator(mode="after")
    def _check(self) -> RetryPolicy:
        if self.max_delay < self.initial_delay:
            raise UsageError("RetryPolicy.max_delay must be >= initial_delay")
        ro = self.retry_on
        if ro is not None and not (
            _is_exc_type(ro)
            or (isinstance(ro, tuple) and all(_is_exc_type(t) for t in ro))
            or (callable(ro) and not isinstance(ro, type))
        ):
            raise UsageError("RetryPolicy.retry_on takes exception types or a predicate")
        return self


def _is_exc_type(x: object) -> bool:
    return isinstance(x, type) and issubclass(x, BaseException)


class BreakerPolicy(_Frozen):
    """When a tool's circuit breaker opens and how it recovers."""

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failed attempts that open the circuit."""
    recovery_time: float = Field(default=30.0, gt=0)
    """Seconds the circuit stays open before one probe call is let through."""
    failure_rate: float | None = Field(default=None, gt=0, le=1)
    """Also open when this share of the calls in the last `window` seconds failed (once
    at least `min_calls` were made); `None` uses the consecutive count only."""
    window: float = Field(default=60.0, gt=0)
    """Seconds of history the failure rate is computed over (in ten slices: a call may
    be forgotten up to a tenth of the window early)."""
    min_calls: int = Field(default=10, ge=1)
    """Calls needed in the window before the failure rate can open the circuit."""
    slow_call_s: float | None = Field(default=None, gt=0)
    """A successful attempt slower than this counts as a failure (the result is kept)."""
    count_low_quality: bool = False
    """Count results flagged by `result_checks` as failures."""
    on_state_change: Callable[[str, str, str], None] | None = None
    """Called as ``(tool, old_state, new_state)`` on every transition; states are
    ``"closed"``, ``"open"`` and ``"half_open"``. Errors it raises are logged, not raised."""


class AdaptiveTimeout(_Frozen):
    """A per-tool timeout derived from the tool's own latency history."""

    percentile: float = Field(default=0.99, gt=0, le=1)
    """Which latency of the recent successful attempts to start from (0.99 = p99)."""
    factor: float = Field(default=2.0, ge=1)
    """The timeout is the percentile times this factor ..."""
    min_timeout: float = Field(default=0.05, gt=0)
    """... but never below this many seconds ..."""
    max_timeout: float = Field(default=60.0, gt=0)
    """... nor above this many."""
    window: int = Field(default=100, ge=1)
    """How many recent latencies are kept."""
    min_samples: int = Field(default=10, ge=1)
    """Until this many latencies are known, the configured `timeout` is used."""

    @model_validator(mode="after")
    def _check(self) -> AdaptiveTimeout:
        if self.max_timeout < self.min_timeout:
            raise UsageError("AdaptiveTimeout.max_timeout must be >= min_timeout")
        if self.min_samples > self.window:
            raise UsageError("AdaptiveTimeout.min_samples must be <= window")
        return self


FallbackSource = Literal["stale_cache", "fallback"]
"""A source of the fallback chain: the last good result, or the policy's `fallback`."""


class ToolPolicy(_Frozen):
    """How calls to one tool are protected. Every field has a safe default."""

    timeout: float | None = Field(default=30.0, gt=0)
    """Seconds per attempt, or `None` for no timeout. A timed-out attempt returns control
    at the deadline; a sync tool's thread is abandoned (Python cannot kill a thread)."""
    idempotent: bool | None = None
    """Safe to run twice? `None` infers it from the tool name (`READ_PREFIXES`,
    `WRITE_PREFIXES`); unknown names count as not idempotent. Only idempotent tools are
    retried, and a non-idempotent call that may have taken effect is answered with
    ``unknown_outcome`` instead of being run again. With `None`, a tool's MCP annotations
    (``readOnlyHint``, ``idempotentHint``, ...) decide before its name, as far as
    `annotations` trusts them."""
    annotations: AnnotationTrust = "cautious"
    """How far a tool's own annotations (MCP tool annotations, in ``tool.metadata``) decide
    whether it is a read or a write when `idempotent` is `None`. ``"cautious"`` (the
    default): only towards more care (a tool named like a read that its server declares
    destructive is a write; a read-only hint never makes a call retried or hedged).
    ``"trust"``: both ways (``readOnlyHint: true`` makes a read, ``idempotentHint: true`` a
    write safe to repeat: retried, journaled, never hedged); for servers you trust, since
    a server can say anything. ``"ignore"``: the name alone. See `core.annotations`."""
    idempotency_key: bool | KeyBuilder = False
    """Declares that the tool's service honours an idempotency key: `True` for the
    default key (a digest of thread id, tool name and tool call id), or a callable
    ``(IdempotencyInfo) -> str`` that builds it from ``tool_name``, ``args``,
    ``thread_id`` and ``tool_call_id``. The tool receives the key through a parameter
    ``idempotency_key: Annotated[str, InjectedToolArg]`` (never in the model's schema).
    Such a tool counts as idempotent whatever `idempotent` says: it is retried, and a
    repeated call gets the earlier answer."""
    retry: RetryPolicy = RetryPolicy()
    """Backoff and which failures are retried (idempotent tools only)."""
    breaker: BreakerPolicy | None = None
    """Circuit breaker settings, or `None` for no breaker."""
    aliases: Mapping[str, Sequence[str]] = Field(default_factory=dict)
    """``{"canonical_arg": ["wrong_name", ...]}``: argument names the model may use instead."""
    unknown_args: Literal["drop", "reject"] = "reject"
    """Arguments the tool's schema does not know (after name repair): ``"drop"`` removes
    them and tells the model so (a repair); ``"reject"`` answers ``invalid_arguments``
    listing each as ``unexpected``. A schema that allows extra keys keeps them either way."""
    dedup: DedupMode | None = None
    """Repeated identical calls: `None` reuses for idempotent tools, blocks for others."""
    dedup_key: Sequence[str] | Callable[[dict[str, Any]], Any] | None = None
    """What makes two calls "the same": `None` uses every argument; a list of argument
    names uses only those; a callable ``(args) -> value`` computes the key itself."""
    dedup_ttl: float = Field(default=600.0, gt=0)
    """Seconds an earlier call is remembered for dedup."""
    dedup_max_entries: int = Field(default=1024, ge=1)
    """Calls remembered per tool (per adapter); the oldest are forgotten first."""
    dedup_looping_after: int = Field(default=2, ge=1)
    """Repeats of one call after which the model is told it is going in circles."""
    result_checks: Sequence[Callable[[Any], str | None]] = ()
    """Callables that return a reason (str) when a successful result is useless, else None."""
    on_low_quality: LowQualityAction = "feedback"
    """What to do when a result check fires."""
    max_consecutive_rollbacks: int = Field(default=2, ge=0)
    """Rollbacks in a row (counted in graph state) before ``rollback`` degrades to feedback."""
    fallback: Any = None
    """Stub data, or a callable ``(tool_name, args) -> data``, used when every attempt failed."""
    max_result_chars: int | None = Field(default=None, gt=0)
    """Cap on the characters of a result sent back to the model, or `None`."""
    detect_error_text: bool = True
    """Treat an answer whose whole text reads as an error report (``Error: ...``,
    ``Database error: ...``: how the MCP reference servers answer some failures, without
    ``isError``) as a ``tool_error``, after the policy's own `result_checks` (a result
    they flag gets `on_low_quality`). `False`: every returned text is a success."""
    expose_error_details: bool = False
    """Development aid: include the (redacted) exception text of unexpected errors."""
    verify: Verifier | None = None
    """For a write (a non-idempotent tool): when a call's outcome is unknown (it timed
    out, or lost its connection, after the request was sent), look it up instead of
    guessing. The callable gets a `VerifyInfo` and returns the write's result if it
    happened (the call is answered with it, marked as verified), or `None` if it did not
    (the call is run once more, with the same idempotency key; not after a timeout,
    whose attempt may still be running). If it raises or does not answer within
    `verify_timeout`, the model gets ``unknown_outcome`` as without it.
    A write is never run more than twice: once, and once more after a lookup that found
    nothing."""
    verify_timeout: float = Field(default=5.0, gt=0)
    """Seconds the `verify` lookup may take."""
    on_unknown_outcome: Literal["answer", "interrupt"] = "answer"
    """For a write whose outcome stays unknown (after `verify`, if any): ``"answer"``
    tells the model (``unknown_outcome``); ``"interrupt"`` asks a person first, with a
    LangGraph ``interrupt()`` whose value is an `OutcomeReview` and whose resume value
    is a `HumanDecision` (run it again, it was done, or give up); the model is then
    told what the person decided. ``"interrupt"`` works in `ResilientToolNode` and
    `ResilientToolsMiddleware` in a graph with a checkpointer (it raises `UsageError`
    without one); sibling calls of the step are not run again on resume."""
    journal: bool = True
    """Writes only (tools that are not idempotent, keyed writes included): keep a durable
    journal of each call, so that a worker that dies mid-call never makes the write run
    again silently (`pipeline.journal`). Before the write runs its intent is recorded
    (idempotency key, tool, a digest of the arguments, owner, lease); when it answers,
    its receipt. On resume a call with a receipt is answered from it; one whose worker
    is gone goes to `verify`, then `on_unknown_outcome`. Kept in the adapter's
    ``store=``, else the graph's store, else the checkpointer's own database (SQLite or
    Postgres). `False` turns it off for this tool."""
    journal_ttl_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """Seconds a journal entry is kept (7 days: longer than a resume after a crash or a
    person's answer to an interrupt usually takes; the tool call id, which the key is
    made of, is never sent again after that)."""
    journal_lease_s: float = Field(default=10.0, gt=0)
    """Seconds a running write's lease lasts; its worker renews it every third of that.
    A worker on another host whose lease ran out is taken for dead (one on the same host
    is seen as dead at once, by its process id)."""
    attach_record: bool = False
    """Attach the per-call record (``response_metadata["resilience"]``) to every answer.
    By default it is attached only when the layer did something (a retry, a repair, a
    reuse, a cache or fallback answer, a cut, an error): a healthy call is answered with
    exactly the message the tool itself gives, as `ToolNode` would. Every call is in
    `stats()`, callbacks and OpenTelemetry either way."""
    max_abandoned_threads: int = Field(default=4, ge=1)
    """Timed-out sync calls of this tool that may still be running before new calls fail
    fast, so that one hung tool cannot take every worker thread."""
    cache_ttl_s: float | None = Field(default=None, gt=0)
    """Idempotent tools only: serve an identical call from a result cache for this many
    seconds (`None`: no cache). Hits skip execution but are still recorded."""
    stale_max_age_s: float | None = Field(default=None, gt=0)
    """Idempotent tools only: when every attempt failed, serve the last good result of
    the same call if it is younger than this, marked stale with its age (`None`: off)."""
    cache_max_entries: int = Field(default=1024, ge=1)
    """Results kept per tool for the cache and the stale fallback."""
    cache_scope: CacheScope = "thread"
    """Who may be served a result that the cache or the stale fallback kept: ``"thread"``
    (the default) only later calls of the same conversation thread, run with the same
    runtime context and ``configurable``; ``"global"`` any caller, across threads,
    workers and users. Safe only for a tool whose result depends on nothing but its
    arguments and the inputs it declares (see `core.reads`): a weather lookup, not a
    tool that reads the current user with ``get_config()`` or ``get_runtime()``."""
    cache_key: CacheKeyBuilder | None = None
    """What identifies a result, instead of the default (the model's arguments and a
    digest of every input the tool declares: state, store, config, runtime, injected
    arguments): ``(CacheKeyInfo) -> value``, e.g. ``lambda c: (c.args, c.context.user_id)``
    with ``cache_scope="global"`` for results shared per user across threads. A key
    function that raises makes the call share nothing (no hit, nothing kept)."""
    fallback_order: tuple[FallbackSource, ...] = ("stale_cache", "fallback")
    """The fallback chain, tried in order after an infrastructure failure; the error
    envelope answers when none applies."""
    adaptive_timeout: AdaptiveTimeout | None = None
    """Derive the attempt timeout from this tool's latency history, starting from `timeout`."""
    deadline_s: float | Literal["auto"] | None = "auto"
    """Seconds the whole call (every attempt and wait) may take; caps each attempt's
    timeout and each backoff wait. ``"auto"`` (the default) is ``2 * timeout + 1`` s
    (61 s with the default `timeout`), so a user who sets only `timeout` gets an answer
    within that; with ``timeout=None`` it is unbounded. `None` turns it off. A run-wide
    deadline can also be passed as an absolute `clock` time in
    ``config["configurable"]["lrt_deadline"]``; the earlier one wins."""
    max_concurrency: int | None = Field(default=None, ge=1)
    """At most this many attempts of this tool run at once (per adapter); the others
    wait for a slot, and the wait counts against the call's deadline (`None`: no limit)."""
    rate_limit: float | BaseRateLimiter | None = None
    """At most this many attempts per second (langchain-core's `InMemoryRateLimiter`,
    no bursts), or a `BaseRateLimiter` of your own (share one between tools to limit
    them together). The wait counts against the call's deadline (`None`: no limit)."""
    isolate: bool = False
    """Run each attempt of this sync tool in a worker process that is killed at the
    timeout. The tool must be picklable (a `StructuredTool` over a module-level function),
    its arguments and result too; injected arguments and wrappers around the tool call
    (``wrap_tool_call``, inner middleware) are not applied in the worker."""
    # -- hedged reads (pipeline.hedge) ---------------------------------------------
    hedge: float | Literal["auto"] | None = None
    """Hedged reads, for idempotent tools: when an attempt has not answered after this
    many seconds, one more attempt of the same call starts beside it, and the first good
    answer wins (the others are cancelled, or, for a sync tool, abandoned and counted
    like a timed-out attempt). ``"auto"``: 1.25 times the tool's own recent p95 latency,
    at most twice its p75 (stalls do not move it), never below `hedge_min_delay`; no
    hedge until 10 latencies are known. `None` (the
    default): off. On a tool that is not idempotent it is ignored (logged once): a write
    is never sent twice. Not for services billed per call, nor for ones that are slow
    for everyone (see the README's "Hedged reads")."""
    max_hedges: int = Field(default=1, ge=1, le=4)
    """Hedges one attempt may get, one more each time the `hedge` delay passes again."""
    hedge_budget: float = Field(default=0.05, ge=0, le=1)
    """Share of the tool's attempts that may be hedged, so a service that is slow for
    everyone is not hit twice as hard: each first attempt adds this much of a token to a
    bucket of at most 10 (full at the start), each hedge takes a whole one. Over any run,
    hedges stay within 10 plus this share of the calls; up to 10 stalls in a row are all
    hedged. Hedges also take from the retry budget (`RetryPolicy.budget_ratio`) of a
    tool that retries."""
    hedge_min_delay: float = Field(default=0.05, gt=0)
    """With ``hedge="auto"``: the shortest hedge delay, in seconds (until the tool's
    latencies are known, it is not hedged at all)."""

    @field_validator("hedge", mode="before")
    @classmethod
    def _check_hedge(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, bool) or (isinstance(v, (int, float)) and v <= 0):
            raise UsageError('hedge must be a delay > 0 in seconds, "auto" or None')
        return v

    # -- end of hedged reads ----------------------------------------------------------
    state_backend: Literal["auto", "local", "store"] = "auto"
    """Where the breaker, dedup ledger and caches of this tool live: ``"auto"`` in the
    adapter's ``store=`` if one was given, else in-process; ``"local"`` always
    in-process; ``"store"`` in the adapter's ``store=``, else in the graph's store
    (``runtime.store``), else in-process. See `state.backend` for each operation's consistency."""
    on_backend_error: Literal["open", "closed"] = "open"
    """When the shared store fails (partition, timeout): ``"open"`` carries on with this
    worker's own state (the breaker and dedup act per worker, so a write sent to two
    workers during the outage may run twice); ``"closed"`` refuses the call with a
    ``transient_failure`` and never runs the tool. Caches always fail open (a miss)."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds for breaker, caches, retry budget, deadlines and latencies
    (tests inject a fake one)."""

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

    @field_validator("deadline_s")
    @classmethod
    def _check_deadline(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, (int, float)) and v <= 0:
            raise UsageError('deadline_s must be > 0, "auto" or None')
        return v

    @property
    def call_deadline_s(self) -> float | None:
        """The call's budget in seconds that `deadline_s` stands for (`None`: unbounded)."""
        if self.deadline_s != "auto":
            return self.deadline_s  # type: ignore[return-value]
        return None if self.timeout is None else 2 * self.timeout + 1

    @field_validator("rate_limit")
    @classmethod
    def _check_rate_limit(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v <= 0:
            raise UsageError("rate_limit must be > 0 calls per second, a BaseRateLimiter or None")
        return v

    @field_validator("fallback_order")
    @classmethod
    def _check_order(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise UsageError("fallback_order lists a source twice")
        return v

    @field_validator("dedup_key", mode="before")
    @classmethod
    def _check_dedup_key(cls, v: Any) -> Any:
        if v is None or callable(v):
            return v
        names = (v,) if isinstance(v, str) else tuple(v)
        if not names or not all(isinstance(n, str) for n in names):
            raise UsageError("dedup_key takes argument names or a callable")
        return names

    @field_validator("result_checks")
    @classmethod
    def _check_checks(cls, v: Sequence[Any]) -> tuple[Any, ...]:
        if not all(callable(c) for c in v):
            raise UsageError("result_checks must be callables")
        return tuple(v)

    @model_validator(mode="after")
    def _check_idempotency_key(self) -> ToolPolicy:
        if self.idempotency_key is not False and self.idempotent is False:
            raise UsageError(
                "idempotency_key declares the tool safe to retry; it contradicts idempotent=False"
            )
        return self


DEFAULT_POLICY = ToolPolicy()


class ResolvedPolicy:
    """A tool's effective policy plus the facts derived from it once.

    `access` is what a call may be (`core.annotations.Access`): a ``read``, an
    ``idempotent_write`` (a keyed write, or one its annotations declare idempotent) or a
    ``write``; `classified_by` says what decided it (``explicit``, ``annotations``,
    ``name``). `idempotent`: safe to send again (not a plain write). `write`: a write by
    our rules, idempotent or not (journaled, never hedged).
    """

    __slots__ = ("access", "classified_by", "hints", "idempotent", "policy", "rerun", "write")

    def __init__(self, policy: ToolPolicy, tool_name: str, hints: ToolHints | None = None) -> None:
        self.policy = policy
        self.hints = hints
        """The tool's annotations, if it has any (`core.annotations.hints_of`)."""
        self.rerun = False
        """A write run once more because a person chose so (`PolicyResolver.for_rerun`)."""
        if policy.idempotency_key is not False:  # the service recognises repeats
            self.access, self.classified_by = "idempotent_write", "explicit"
        elif policy.idempotent is not None:
            self.access = "read" if policy.idempotent else "write"
            self.classified_by = "explicit"
        else:
            by_name = infer_idempotent(tool_name)
            self.access, self.classified_by = classify(by_name, hints, policy.annotations)
        self.idempotent = self.access != "write"
        self.write = self.access != "read"


_WILDCARDS = re.compile(r"\*|\?|\[[^\]]*\]")


def pattern_specificity(pattern: str) -> int:
    """How specific an `fnmatch` pattern is: its count of literal characters."""
    return len(_WILDCARDS.sub("", pattern))


def _overlay(base: ToolPolicy, layer: ToolPolicy) -> ToolPolicy:
    """`base` with the fields `layer` sets explicitly taken from `layer`."""
    if not layer.model_fields_set:
        return base
    return base.model_copy(update={k: getattr(layer, k) for k in layer.model_fields_set})


class PolicyResolver:
    """Resolves ``policy``, ``patterns`` and ``policies`` into one policy per tool.

    Resolution order, lowest to highest precedence; each layer overrides only the
    fields it sets explicitly (pydantic's ``model_fields_set``):

    1. the built-in defaults (`ToolPolicy`'s field defaults);
    2. ``policy``, the global default of every tool;
    3. ``patterns``, ``{fnmatch_pattern: ToolPolicy}`` (case-sensitive, e.g.
       ``"search_*"``): of the patterns that match the tool name, only the most
       specific applies (the one with the most literal characters; on a tie, the
       first given);
    4. ``policies[tool_name]``, the tool's own policy.

    Example: ``PolicyResolver(ToolPolicy(timeout=20), {"create_order":
    ToolPolicy(idempotency_key=True)}, patterns={"search_*": ToolPolicy(timeout=10),
    "create_*": ToolPolicy(timeout=30)})`` gives ``search_docs`` 10 s, ``create_order``
    30 s with an idempotency key, and every other tool 20 s. Results are cached per
    tool name.
    """

    def __init__(
        self,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        if policy is not None and not isinstance(policy, ToolPolicy):
            raise UsageError("policy must be a ToolPolicy")
        for name, p in (policies or {}).items():
            if not isinstance(p, ToolPolicy):
                raise UsageError(f"policies[{name!r}] must be a ToolPolicy")
        for pattern, p in (patterns or {}).items():
            if not isinstance(pattern, str) or not pattern:
                raise UsageError("patterns keys must be non-empty fnmatch patterns (str)")
            if not isinstance(p, ToolPolicy):
                raise UsageError(f"patterns[{pattern!r}] must be a ToolPolicy")
        self.default = policy or DEFAULT_POLICY
        self.policies = dict(policies or {})
        self.patterns = dict(patterns or {})
        # Most specific first; `sorted` is stable, so ties keep the order given.
        self._ranked = sorted(self.patterns, key=lambda p: -pattern_specificity(p))
        self._cache: dict[str, ResolvedPolicy] = {}
        self._reruns: dict[str, ResolvedPolicy] = {}  # `for_rerun`, per tool name
        self._tools: dict[str, Any] = {}  # the tool object each name was resolved with

    def pattern_for(self, tool_name: str) -> str | None:
        """The pattern whose policy applies to `tool_name`, if any matches."""
        return next((p for p in self._ranked if fnmatchcase(tool_name, p)), None)

    def for_rerun(self, tool_name: str, tool: Any = None) -> ResolvedPolicy:
        """The policy of a write run once more because a person chose so: no lookup,
        no dedup (the call is its own earlier entry), never another question."""
        base = self.resolve(tool_name, tool)
        hit = self._reruns.get(tool_name)
        if hit is None:
            policy = base.policy.model_copy(
                update={"verify": None, "dedup": "off", "on_unknown_outcome": "answer"}
            )
            hit = self._reruns[tool_name] = ResolvedPolicy(policy, tool_name, base.hints)
            hit.idempotent = base.idempotent
            hit.rerun = True
        return hit

    def resolve(self, tool_name: str, tool: Any = None) -> ResolvedPolicy:
        """The policy of `tool_name`; `tool` (the tool object, when the caller has it)
        brings its annotations (`core.annotations`), read once per tool object."""
        hit = self._cache.get(tool_name)
        if hit is not None and (tool is None or self._tools.get(tool_name) is tool):
            return hit
        hints = None if tool is None else hints_of(tool)
        if tool is not None:
            self._tools[tool_name] = tool
        if hit is None or hit.hints != hints:
            merged = self.default
            pattern = self.pattern_for(tool_name)
            if pattern is not None:
                merged = _overlay(merged, self.patterns[pattern])
            own = self.policies.get(tool_name)
            if own is not None:
                merged = _overlay(merged, own)
            hit = self._cache[tool_name] = ResolvedPolicy(merged, tool_name, hints)
            self._reruns.pop(tool_name, None)
            if hit.classified_by == "name" and set_aside(
                infer_idempotent(tool_name), hints, merged.annotations
            ):
                log.info(
                    "%r declares annotations that would make it retried or reused; they are "
                    'not trusted (ToolPolicy(annotations="trust") applies them)',
                    tool_name,
                )
        return hit


def check_policy_names(resolver: PolicyResolver, tool_names: Sequence[str]) -> None:
    """Raise `UsageError` when a ``policies`` key names none of `tool_names`.

    A misspelt key would otherwise silently leave its tool on the default policy.
    """
    known = set(tool_names)
    for name in resolver.policies:
        if name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UsageError(
            f"policies[{name!r}] names no tool of this adapter.{hint} "
            f"Its tools are: {', '.join(sorted(known)) or '(none)'}."
        )
