"""The option groups of results served again: the result cache (`Cache`) and what
answers when the service failed (`Fallback`: the stale result, the stub data).

Both read the same kept results (`Cache.scope`, `Cache.key`, `Cache.max_entries` say
which and for whom); `Fallback` says when the last good one answers a failed call.
Shorthands: ``cache=60`` is ``Cache(ttl_s=60)``; ``fallback=data`` (any data, or a
callable) is ``Fallback(stub=data)``.

`Cache.stale_s` and `Cache.fallback_order` moved to `Fallback` (`stale_s`, `order`):
given to a `Cache`, they still work for one minor release (a `DeprecationWarning` names
the new spelling), and the `ToolPolicy` holding the cache takes them (`settle_moved`).
Read on a `Cache`, they raise an `AttributeError` naming where they are now (a group
does not know the policy that holds it).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, PrivateAttr, field_validator

from .errors import UsageError
from .frozen import Options
from .hooks import CacheKeyBuilder, CacheScope, FallbackSource
from .policy_compat import REMOVAL, Renamed

MOVED: Mapping[str, Renamed] = {
    "stale_s": Renamed("Cache", "stale_s", "fallback", "Fallback", "stale_s"),
    "fallback_order": Renamed("Cache", "fallback_order", "fallback", "Fallback", "order"),
}
"""The options that moved from `Cache` to `Fallback`, by old name."""


class Cache(Options):
    """Results kept and served again (`pipeline.cache`, and the stale result of
    `Fallback`); idempotent tools only. Shorthand ``cache=60`` (`ttl_s`);
    ``cache=None`` is ``Cache(ttl_s=None)``."""

    ttl_s: float | None = Field(default=None, gt=0)
    """Serve an identical call from a result cache for this many seconds (`None`: no
    cache). Hits skip execution but are still recorded."""
    max_entries: int = Field(default=1024, ge=1)
    """Results kept per tool for the cache and the stale fallback."""
    scope: CacheScope = "thread"
    """Who may be served a result that the cache or the stale fallback kept: ``"thread"``
    (the default) only later calls of the same conversation thread, run with the same
    runtime context and ``configurable``; ``"global"`` any caller, across threads,
    workers and users. Safe only for a tool whose result depends on nothing but its
    arguments and the inputs it declares (see `core.reads`): a weather lookup, not a
    tool that reads the current user with ``get_config()`` or ``get_runtime()``."""
    key: CacheKeyBuilder | None = None
    """What identifies a result, instead of the default (the model's arguments and a
    digest of every input the tool declares: state, store, config, runtime, injected
    arguments): ``(CacheKeyInfo) -> value``, e.g. ``lambda c: (c.args, c.context.user_id)``
    with ``scope="global"`` for results shared per user across threads. A key function
    that raises makes the call share nothing (no hit, nothing kept)."""

    _moved: dict[str, Any] = PrivateAttr(default_factory=dict)

    if not TYPE_CHECKING:  # the old names are no part of the signature

        def __init__(self, /, **data: Any) -> None:
            moved = {name: data.pop(name) for name in MOVED if name in data}
            for name in moved:
                row = MOVED[name]
                warnings.warn(
                    f"Cache({name}=...) is deprecated: write ToolPolicy({row.spelling}); {REMOVAL}",
                    DeprecationWarning,
                    stacklevel=2,
                )
            super().__init__(**data)
            if moved:
                self._moved = moved

        def __getattr__(self, name: str) -> Any:
            row = MOVED.get(name)
            if row is not None:
                raise AttributeError(f"Cache.{name} moved: read ToolPolicy.{row.path}")
            return super().__getattr__(name)

    def moved(self) -> dict[str, Any]:
        """What this cache was given under the names that moved to `Fallback`, by old
        name (``{"stale_s": 600}``); the `ToolPolicy` holding it takes them."""
        return dict(self._moved)

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            return cls(ttl_s=value)
        return super().coerce(value)


class Fallback(Options):
    """What answers a call when the service failed (`pipeline.fallback`): after a
    timeout, a transient error, a busy tool or an open circuit (never a bad argument),
    the sources in `order` are tried and the first that has an answer gives it; the
    error envelope answers when none has. Shorthand ``fallback=data``: the `stub` (any
    data, a dict included, or a callable)."""

    stub: Any = None
    """Stub data, or a callable ``(tool_name, args) -> data``, marked in the answer as
    substitute data (``served_by="fallback"``). For a write it is used only when the
    tool certainly did not run (open circuit, busy, timed out before starting), never
    when the action may have taken effect. A callable that raises is skipped (the
    failure is answered). `None`: no stub."""
    stale_s: float | None = Field(default=None, gt=0)
    """Idempotent tools only: serve the last good result of the same call (kept as the
    cache keeps results: `Cache.scope`, `Cache.key`, `Cache.max_entries`) if it is
    younger than this many seconds, marked stale with its age (``served_by=
    "stale_cache"``). `None`: off."""
    order: tuple[FallbackSource, ...] = ("stale_cache", "fallback")
    """The sources, tried in this order: ``"stale_cache"`` (the last good result,
    `stale_s`) and ``"fallback"`` (the `stub`); leave one out to never use it."""

    @field_validator("order")
    @classmethod
    def _check_order(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise UsageError("Fallback.order lists a source twice")
        return v

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """A `Fallback` as it is; anything else is its `stub` (a dict is stub data
        here, not keyword arguments)."""
        return value if isinstance(value, Fallback) else cls(stub=value)


def settle_moved(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a `ToolPolicy`'s keyword arguments) with what its cache was given under
    the old names (`MOVED`) moved into its `Fallback`. Given there as well, a value must
    be the same (else `UsageError`: never two values for one option)."""
    cache = Cache.coerce(data["cache"]) if "cache" in data else None
    moved = cache.moved() if isinstance(cache, Cache) else {}
    if not moved:
        return data
    assert cache is not None
    given = Fallback.coerce(data["fallback"]) if "fallback" in data else None
    fields = {} if given is None else {k: getattr(given, k) for k in given.model_fields_set}
    for old, value in moved.items():
        new = MOVED[old].field
        if new in fields and fields[new] != value:
            raise UsageError(
                f"Cache({old}=...) and Fallback({new}=...) are one option given two "
                f"values: write it once, as ToolPolicy(fallback=Fallback({new}=...))"
            )
        fields[new] = value
    kept = {k: getattr(cache, k) for k in cache.model_fields_set}
    return {**data, "cache": Cache(**kept), "fallback": Fallback(**fields)}
