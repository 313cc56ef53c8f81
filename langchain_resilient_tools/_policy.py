"""Policies: frozen, keyword-only, validated when built.

`ToolPolicy` says how one tool is protected. `policy=` on an adapter is the default for
every tool and `policies={name: ToolPolicy(...)}` refines it per tool: a per-tool policy
overrides only the fields it sets explicitly (see `PolicyResolver`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._errors import UsageError

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


class ToolPolicy(_Frozen):
    """How calls to one tool are protected. Every field has a safe default."""

    timeout: float | None = Field(default=30.0, gt=0)
    """Seconds per attempt, or `None` for no timeout. A timed-out attempt returns control
    at the deadline; a sync tool's thread is abandoned (Python cannot kill a thread)."""
    idempotent: bool | None = None
    """Safe to run twice? `None` infers it from the tool name (`READ_PREFIXES`,
    `WRITE_PREFIXES`); unknown names count as not idempotent. Only idempotent tools are
    retried, and a non-idempotent call that may have taken effect is answered with
    ``unknown_outcome`` instead of being run again."""
    retry: RetryPolicy = RetryPolicy()
    """Backoff and which failures are retried (idempotent tools only)."""
    breaker: BreakerPolicy | None = None
    """Circuit breaker settings, or `None` for no breaker."""
    aliases: Mapping[str, Sequence[str]] = Field(default_factory=dict)
    """``{"canonical_arg": ["wrong_name", ...]}``: argument names the model may use instead."""
    dedup: DedupMode | None = None
    """Repeated identical calls: `None` reuses for idempotent tools, blocks for others."""
    result_checks: Sequence[Callable[[Any], str | None]] = ()
    """Callables that return a reason (str) when a successful result is useless, else None."""
    on_low_quality: LowQualityAction = "feedback"
    """What to do when a result check fires."""
    fallback: Any = None
    """Stub data, or a callable ``(tool_name, args) -> data``, used when every attempt failed."""
    max_result_chars: int | None = Field(default=None, gt=0)
    """Cap on the characters of a result sent back to the model, or `None`."""
    expose_error_details: bool = False
    """Development aid: include the (redacted) exception text of unexpected errors."""
    max_abandoned_threads: int = Field(default=4, ge=1)
    """Timed-out sync calls of this tool that may still be running before new calls fail
    fast, so that one hung tool cannot take every worker thread."""

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

    @field_validator("result_checks")
    @classmethod
    def _check_checks(cls, v: Sequence[Any]) -> tuple[Any, ...]:
        if not all(callable(c) for c in v):
            raise UsageError("result_checks must be callables")
        return tuple(v)


DEFAULT_POLICY = ToolPolicy()


class ResolvedPolicy:
    """A tool's effective policy plus the facts derived from it once."""

    __slots__ = ("idempotent", "policy")

    def __init__(self, policy: ToolPolicy, tool_name: str) -> None:
        self.policy = policy
        self.idempotent = (
            policy.idempotent if policy.idempotent is not None else infer_idempotent(tool_name)
        )


class PolicyResolver:
    """Resolves ``policy`` (default) and ``policies`` (per tool) into one policy per tool.

    A per-tool policy overrides only the fields it sets explicitly; the rest come from
    the default. Results are cached per tool name.
    """

    def __init__(
        self, policy: ToolPolicy | None = None, policies: Mapping[str, ToolPolicy] | None = None
    ) -> None:
        if policy is not None and not isinstance(policy, ToolPolicy):
            raise UsageError("policy must be a ToolPolicy")
        for name, p in (policies or {}).items():
            if not isinstance(p, ToolPolicy):
                raise UsageError(f"policies[{name!r}] must be a ToolPolicy")
        self.default = policy or DEFAULT_POLICY
        self.policies = dict(policies or {})
        self._cache: dict[str, ResolvedPolicy] = {}

    def resolve(self, tool_name: str) -> ResolvedPolicy:
        hit = self._cache.get(tool_name)
        if hit is None:
            own = self.policies.get(tool_name)
            merged = self.default
            if own is not None:
                merged = self.default.model_copy(
                    update={k: getattr(own, k) for k in own.model_fields_set}
                )
            hit = self._cache[tool_name] = ResolvedPolicy(merged, tool_name)
        return hit
