"""`ToolPolicy`: how calls to one tool are protected, and how the policies given to an
adapter resolve into one per tool.

A policy is a few plain fields (`timeout`, `idempotent`) and one options group per
strategy, in `STAGES` order (`core.options`, `core.reuse`, `core.strategies`):
``ToolPolicy(timeout=5, retry=3, cache=Cache(ttl_s=60), dedup="block")``. `policy=` on
an adapter is the default for every tool and `policies={name: ToolPolicy(...)}` refines
it per tool, group by group (`overlay`, `PolicyResolver`). The flat names of earlier
releases still work for one minor release (`core.policy_compat`).
"""

from __future__ import annotations

import difflib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from .annotations import AnnotationTrust, ToolHints, classify, hints_of, set_aside
from .errors import UsageError
from .frozen import Options
from .hooks import (
    CacheKeyBuilder,
    CacheKeyInfo,
    CacheScope,
    DedupMode,
    FallbackSource,
    IdempotencyInfo,
    KeyBuilder,
    LowQualityAction,
    RetryOn,
    UnknownOutcomeAction,
    Verifier,
    VerifyInfo,
)
from .options import (
    Args,
    Dedup,
    Journal,
    Limits,
    Output,
    ResultChecks,
    Shared,
    Timeouts,
    UnknownOutcome,
)
from .reuse import Cache, Fallback, settle_moved
from .strategies import AdaptiveTimeout, BreakerPolicy, Hedge, RetryBudget, RetryPolicy

__all__ = [  # the names other modules import from here
    "AdaptiveTimeout", "Args", "BreakerPolicy", "Cache", "CacheKeyBuilder", "CacheKeyInfo",
    "CacheScope", "Dedup", "DedupMode", "Fallback", "FallbackSource", "Hedge", "IdempotencyInfo",
    "Journal", "KeyBuilder", "Limits", "LowQualityAction", "Options", "Output",
    "PolicyResolver", "ResolvedPolicy", "ResultChecks", "RetryBudget", "RetryOn",
    "RetryPolicy", "Shared", "Timeouts", "ToolPolicy", "UnknownOutcome",
    "UnknownOutcomeAction", "Verifier", "VerifyInfo", "check_policy_names",
    "infer_idempotent", "name_words", "overlay", "pattern_specificity",
]  # fmt: skip

log = logging.getLogger(__name__)

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
_SEPARATORS = re.compile(r"[_\-.\s]+")


def name_words(name: str) -> list[str]:
    """The words of tool `name`, lowercased, as every tool-name rule reads them: split on
    ``_``, ``-``, ``.``, spaces and camelCase boundaries (``createFile``, ``create.file``,
    ``create-file`` and ``CreateFile`` are all ``["create", "file"]``)."""
    return [w for w in _SEPARATORS.split(_CAMEL.sub("_", name).lower()) if w]


def infer_idempotent(tool_name: str) -> bool:
    """Whether `tool_name` reads as a read-only tool, from `READ_PREFIXES`/`WRITE_PREFIXES`."""
    words = name_words(tool_name)
    for n in (2, 1):  # a two-word prefix ("look_up") wins over its first word
        head = "_".join(words[:n])
        if head in WRITE_PREFIXES:
            return False
        if head in READ_PREFIXES:
            return True
    return False


class ToolPolicy(Options):
    """How calls to one tool are protected. Every option has a safe default.

    One-liners for the common cases: ``ToolPolicy.flaky_read()``,
    ``ToolPolicy.critical_write(verify=...)``, ``ToolPolicy.mcp()``. Shorthands:
    ``timeout=5``, ``retry=3`` (``None``: one attempt), ``dedup="block"``,
    ``hedge="auto"`` or ``hedge=0.2``, ``cache=60`` (a TTL), ``fallback=data`` (stub
    data), ``journal=False``, ``unknown_outcome="interrupt"``; and, as in earlier
    releases, ``aliases=``,
    ``result_checks=``, ``on_low_quality=``, ``max_result_chars=``.
    """

    if TYPE_CHECKING:  # what a type checker and an IDE show: the shorthands included

        def __init__(
            self,
            *,
            idempotent: bool | None = None,
            idempotency_key: bool | KeyBuilder = False,
            args: Args = ...,
            journal: Journal | bool = ...,
            dedup: Dedup | DedupMode | None = ...,
            fallback: Fallback | Any = ...,
            cache: Cache | float | None = ...,
            unknown_outcome: UnknownOutcome | UnknownOutcomeAction = ...,
            retry: RetryPolicy | int | None = ...,
            hedge: Hedge | float | Literal["auto"] | None = None,
            breaker: BreakerPolicy | None = None,
            results: ResultChecks = ...,
            limits: Limits = ...,
            timeout: float | None = 30.0,
            timeouts: Timeouts = ...,
            output: Output = ...,
            shared: Shared = ...,
            clock: Callable[[], float] = ...,
            aliases: Mapping[str, Sequence[str]] = ...,
            result_checks: Sequence[Callable[[Any], str | None]] = ...,
            on_low_quality: LowQualityAction = ...,
            max_result_chars: int | None = ...,
        ) -> None: ...

    # -- what the tool is ------------------------------------------------------------
    idempotent: bool | None = None
    """Safe to run twice? `None` infers it from the tool name (`READ_PREFIXES`,
    `WRITE_PREFIXES`); unknown names count as not idempotent. Only idempotent tools are
    retried and hedged, and a non-idempotent call that may have taken effect is
    answered with ``unknown_outcome`` instead of being run again. With `None`, a tool's
    MCP annotations (``readOnlyHint``, ``idempotentHint``, ...) decide before its name,
    as far as `annotations` trusts them."""
    annotations: AnnotationTrust = "cautious"
    """How far a tool's own annotations (MCP tool annotations, in ``tool.metadata`` as
    langchain-mcp-adapters or `langchain.mcp` put them, or bare ``read_only`` /
    ``destructive`` / ``idempotent`` keys: `core.annotations.hints_of`) decide whether it
    is a read or a write when `idempotent` is `None`. ``"cautious"`` (the default): only
    towards more care (a tool named like a read that its server declares destructive is
    a write; a read-only hint never makes a call retried or hedged).
    ``"trust"``: both ways (``readOnlyHint: true`` makes a read, ``idempotentHint: true`` a
    write safe to repeat: retried, journaled, never hedged); for servers you trust, since
    a server can say anything. ``"ignore"``: the name alone. See `core.annotations`."""
    idempotency_key: bool | KeyBuilder = False
    """Declares that the tool's service honours an idempotency key: `True` for the
    default key (a digest of thread id, tool name, tool call id and the call's step in
    its run: see `core.idempotency`), or a callable ``(IdempotencyInfo) -> str`` that
    builds it from ``tool_name``, ``args``, ``thread_id``, ``tool_call_id`` and
    ``position``. The tool receives the key through a parameter
    ``idempotency_key: Annotated[str, InjectedToolArg]`` (never in the model's schema).
    Such a tool counts as idempotent whatever `idempotent` says: it is retried, and a
    repeated call gets the earlier answer."""
    # -- the stages, in `STAGES` order -------------------------------------------------
    args: Args = Args()
    """Repair of the model's arguments: `Args.aliases`, what happens to unknown ones."""
    journal: Journal = Journal()
    """The durable journal of writes; ``journal=False`` turns it off."""
    dedup: Dedup = Dedup()
    """Repeated identical calls; ``dedup="block"`` sets the mode."""
    fallback: Fallback = Fallback()
    """What answers when the service failed: the last good result (`Fallback.stale_s`),
    stub data (`Fallback.stub`), in `Fallback.order`; ``fallback=data`` (or a callable
    ``(tool_name, args) -> data``) sets the stub."""
    cache: Cache = Cache()
    """The result cache of idempotent tools (and the results the stale fallback reads);
    ``cache=60`` caches results for 60 s."""
    unknown_outcome: UnknownOutcome = UnknownOutcome()
    """A write whose outcome is unknown: look it up (`UnknownOutcome.verify`), tell the
    model, or ask a person (``unknown_outcome="interrupt"``)."""
    retry: RetryPolicy = RetryPolicy()
    """Backoff and which failures are retried (idempotent tools only); ``retry=3`` is 3
    attempts in all, ``retry=None`` one."""
    hedge: Hedge | None = None
    """Hedged reads (idempotent tools only): ``hedge="auto"`` or a delay in seconds;
    `None` (the default): off."""
    breaker: BreakerPolicy | None = None
    """Circuit breaker settings, or `None` for no breaker."""
    results: ResultChecks = ResultChecks()
    """Checks of successful results, and what a flagged result gets."""
    limits: Limits = Limits()
    """Concurrency and rate limits of the tool's attempts."""
    timeout: float | None = Field(default=30.0, gt=0)
    """Seconds per attempt, or `None` for no timeout. A timed-out attempt returns control
    at the deadline; a sync tool's thread is abandoned (Python cannot kill a thread)."""
    timeouts: Timeouts = Timeouts()
    """The rest of time: the whole call's deadline, an adaptive timeout, abandoned
    threads, process isolation."""
    output: Output = Output()
    """What goes back: a cap on result size, the per-call record, error details."""
    shared: Shared = Shared()
    """Where the tool's breaker, dedup ledger and caches live across workers."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds for breaker, caches, retry budget, deadlines and latencies
    (tests inject a fake one)."""

    @field_validator(
        "args", "journal", "dedup", "fallback", "cache", "unknown_outcome", "retry", "hedge",
        "breaker", "results", "limits", "timeouts", "output", "shared", mode="before",
    )  # fmt: skip
    @classmethod
    def _shorthand(cls, v: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        return cls.coerce_group(info.field_name, v)

    @classmethod
    def prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``Cache(stale_s=...)``, ``Cache(fallback_order=...)``: into `fallback`."""
        return settle_moved(data)

    @model_validator(mode="after")
    def _check_idempotency_key(self) -> ToolPolicy:
        if self.idempotency_key is not False and self.idempotent is False:
            raise UsageError(
                "idempotency_key declares the tool safe to retry; it contradicts idempotent=False"
            )
        return self

    @property
    def call_deadline_s(self) -> float | None:
        """The call's budget in seconds that `Timeouts.deadline` stands for (`None`:
        unbounded)."""
        deadline = self.timeouts.deadline
        if deadline != "auto":
            return deadline  # type: ignore[return-value]
        return None if self.timeout is None else 2 * self.timeout + 1

    # -- presets -------------------------------------------------------------------------

    @classmethod
    def flaky_read(cls, **overrides: Any) -> ToolPolicy:
        """A read from a flaky service: idempotent, 4 attempts, hedged (``"auto"``), a
        circuit breaker, and the last good result (up to an hour old) when every attempt
        failed. Keyword arguments change it group by group, as a per-tool policy would."""
        preset = cls(
            idempotent=True,
            retry=RetryPolicy(max_attempts=4),
            hedge="auto",
            breaker=BreakerPolicy(),
            fallback=Fallback(stale_s=3600.0),
        )
        return overlay(preset, cls(**overrides)) if overrides else preset

    @classmethod
    def critical_write(cls, *, verify: Verifier | None = None, **overrides: Any) -> ToolPolicy:
        """A write to a payment or email API: not idempotent, journaled, a repeated call
        blocked, retried only when its request never left or was refused (invariant 16:
        the default `RetryPolicy`, which sends a write again for nothing else); a call
        whose outcome is unknown is looked up with `verify` if given, else a person is
        asked (``unknown_outcome="interrupt"``: a graph with a checkpointer)."""
        preset = cls(
            idempotent=False,
            journal=True,
            dedup="block",
            unknown_outcome=UnknownOutcome(verify=verify) if verify else "interrupt",
        )
        return overlay(preset, cls(**overrides)) if overrides else preset

    @classmethod
    def mcp(cls, **overrides: Any) -> ToolPolicy:
        """The tools of an MCP server: a shorter timeout (10 s per attempt), and an
        answer whose text reads as an error report counted as an error."""
        preset: dict[str, Any] = {
            "timeout": 10.0,
            "results": ResultChecks(detect_error_text=True),
            "annotations": "trust",  # the server's readOnlyHint / idempotentHint decide
        }
        return overlay(cls(**preset), cls(**overrides)) if overrides else cls(**preset)


DEFAULT_POLICY = ToolPolicy()


def _merge(base: Any, layer: Any) -> Any:
    """A group of `base` changed by the fields `layer` sets explicitly (recursively);
    any other value: `layer`."""
    if not isinstance(layer, Options) or type(base) is not type(layer):
        return layer
    if not layer.model_fields_set:
        return base
    explicit = {k: getattr(base, k) for k in base.model_fields_set}
    for k in layer.model_fields_set:
        explicit[k] = _merge(explicit.get(k, getattr(base, k)), getattr(layer, k))
    return type(layer)(**explicit)


def overlay(base: ToolPolicy, layer: ToolPolicy) -> ToolPolicy:
    """`base` with what `layer` sets explicitly: a plain field whole, and of a group
    only the fields set explicitly in it (``cache=Cache(ttl_s=60)`` changes the TTL and
    keeps the base's scope; a shorthand sets one field: ``cache=60`` is the TTL)."""
    if not layer.model_fields_set:
        return base
    update = {k: _merge(getattr(base, k), getattr(layer, k)) for k in layer.model_fields_set}
    return base.model_copy(update=update)


class ResolvedPolicy:
    """A tool's effective policy plus the facts derived from it once.

    `access` is what a call may be (`core.annotations.Access`): a ``read``, an
    ``idempotent_write`` (a keyed write, or one its annotations declare idempotent) or a
    ``write``; `classified_by` says what decided it (``explicit``, ``annotations``,
    ``name``). `idempotent`: safe to send again (not a plain write). `write`: a write by
    our rules, idempotent or not (journaled, never hedged).

    The options every call reads are copied out of their groups here, once per tool: a
    slot reads several times faster than a pydantic field, and a grouped option is two
    of those (`policy.timeouts.isolate`). Read the rest from `policy`.
    """

    __slots__ = (
        "access", "adaptive", "attach_record", "classified_by", "clock", "deadline_s",
        "dedup_mode", "detect_text", "hints", "idempotent", "isolate", "journal_lease_s",
        "journal_ttl_s", "key_builder", "keyed", "max_abandoned_threads", "max_attempts",
        "max_chars", "plain_attempt", "policy", "rerun", "retry_budget", "timeout",
        "unknown_args", "write",
    )  # fmt: skip

    @property
    def hedged(self) -> bool:
        """Whether calls of the tool race hedges (`pipeline.hedge`): never for a write."""
        return self.policy.hedge is not None and not self.write

    def __init__(self, policy: ToolPolicy, tool_name: str, hints: ToolHints | None = None) -> None:
        self.policy = policy
        self.hints = hints
        """The tool's annotations, if it has any (`core.annotations.hints_of`)."""
        self.rerun = False
        """A write run once more because a person chose so (`PolicyResolver.for_rerun`)."""
        self.keyed = policy.idempotency_key is not False
        """The tool's service honours idempotency keys (`ToolPolicy.idempotency_key`)."""
        if self.keyed:  # the service recognises repeats
            self.access, self.classified_by = "idempotent_write", "explicit"
        elif policy.idempotent is not None:
            self.access = "read" if policy.idempotent else "write"
            self.classified_by = "explicit"
        else:
            by_name = infer_idempotent(tool_name)
            self.access, self.classified_by = classify(by_name, hints, policy.annotations)
        self.idempotent = self.access != "write"
        self.write = self.access != "read"
        # -- read by every call ------------------------------------------------------
        self.timeout = policy.timeout
        self.deadline_s = policy.call_deadline_s
        self.clock = policy.clock
        timeouts = policy.timeouts
        self.adaptive = timeouts.adaptive
        self.isolate = timeouts.isolate
        self.max_abandoned_threads = timeouts.max_abandoned_threads
        self.plain_attempt = self.adaptive is None and not self.isolate and not self.hedged
        """The attempt stage's short path: no latency to learn, no worker process, no
        race to tell when the tool began (`core.probe`)."""
        self.unknown_args = policy.args.unknown
        self.dedup_mode = policy.dedup.mode
        self.max_attempts = policy.retry.max_attempts
        self.retry_budget = policy.retry.budget
        self.detect_text = policy.results.detect_error_text and not policy.results.checks
        """Text that reads as an error report fails the call at once: detection on, and
        no result checks of the user's (they run first, in `pipeline.checks`)."""
        self.max_chars = policy.output.max_chars
        self.attach_record = policy.output.attach_record
        # -- read by every journaled write -------------------------------------------
        self.journal_lease_s = policy.journal.lease_s
        self.journal_ttl_s = policy.journal.ttl_s
        builder = policy.idempotency_key
        self.key_builder: Callable[[IdempotencyInfo], str] | None = (
            builder if callable(builder) else None
        )
        """The tool's idempotency key callable (`ToolPolicy.idempotency_key`), if any."""


_WILDCARDS = re.compile(r"\*|\?|\[[^\]]*\]")


def pattern_specificity(pattern: str) -> int:
    """How specific an `fnmatch` pattern is: its count of literal characters."""
    return len(_WILDCARDS.sub("", pattern))


class PolicyResolver:
    """Resolves ``policy``, ``patterns`` and ``policies`` into one policy per tool.

    Resolution order, lowest to highest precedence; each layer overrides only what it
    sets explicitly (pydantic's ``model_fields_set``), group by group (`overlay`):

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
    30 s with an idempotency key, and every other tool 20 s. With a default
    ``ToolPolicy(cache=Cache(scope="global"), fallback=Fallback(stale_s=300))``,
    ``policies={"search": ToolPolicy(cache=Cache(ttl_s=60))}`` gives ``search`` a 60 s
    TTL, the global scope and the 300 s stale fallback. Results are cached per tool name: a policy is
    resolved once per tool, never per call.
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
            was = base.policy
            policy = was.model_copy(
                update={
                    "unknown_outcome": was.unknown_outcome.model_copy(
                        update={"verify": None, "action": "answer"}
                    ),
                    "dedup": was.dedup.model_copy(update={"mode": "off"}),
                }
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
            try:
                if pattern is not None:
                    merged = overlay(merged, self.patterns[pattern])
                own = self.policies.get(tool_name)
                if own is not None:
                    merged = overlay(merged, own)
            except ValueError as exc:  # e.g. a max_delay below the default's initial_delay
                detail = (
                    "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                    if isinstance(exc, ValidationError)
                    else str(exc)
                )
                raise UsageError(
                    f"the policies given for {tool_name!r} do not combine: {detail}"
                ) from exc
            hit = self._cache[tool_name] = ResolvedPolicy(merged, tool_name, hints)
            self._reruns.pop(tool_name, None)
            if hints is not None and hints.set_aside:
                log.warning(
                    "%r declares annotations in several places that disagree: read from "
                    "%s (the most careful), set aside: %s (ToolPolicy(idempotent=...) "
                    "decides explicitly)",
                    tool_name,
                    hints.source,
                    "; ".join(hints.set_aside),
                )
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
    for name in tool_names:  # policies that do not combine fail here, not at a first call
        resolver.resolve(name)
