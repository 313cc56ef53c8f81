"""The flat option names of `ToolPolicy` before it was grouped, kept for one minor release.

`RENAMED` is the one table of every old name: the group and field it moved to, and
whether it is deprecated. Everything else here works from it:

- `fold` takes old names out of the keyword arguments of a policy being built and puts
  them into their groups, with a `DeprecationWarning` naming the new spelling
  (``ToolPolicy(cache_ttl_s=60)`` is ``ToolPolicy(cache=Cache(ttl_s=60))``);
- `readers` lets ``policy.cache_ttl_s`` still read (with the same warning);
- `unknown_option` says which valid option a misspelt one was meant to be.

Three kinds of rows:

- ``deprecated``: the old name works, with a warning, until the next minor release;
- ``kept``: a name DESIGN.md gives users (``aliases``, ``result_checks``,
  ``on_low_quality``, ``max_result_chars``), accepted and readable without a warning;
- ``shorthand``: the old name *is* the group's name (``dedup="block"``, ``hedge="auto"``,
  ``journal=False``): the value is the group's main field. Accepted without a warning;
  reading the attribute gives the group (``policy.dedup.mode`` is the old value).

This module does no I/O and knows no option class: the classes it serves find their
group classes and read their shorthands themselves (`core.frozen.Options.group_class`,
`coerce_group`).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import UsageError

Kind = Literal["deprecated", "kept", "shorthand"]


@dataclass(frozen=True, slots=True)
class Renamed:
    """One old flat name: where its value lives now."""

    owner: str
    """The class it was an option of: ``"ToolPolicy"`` or ``"RetryPolicy"``."""
    old: str
    group: str
    """The owner's field that holds the group now (``"cache"``)."""
    group_class: str
    """The group's class (``"Cache"``), for messages."""
    field: str
    """The group's field the value went to (``"ttl_s"``)."""
    kind: Kind = "deprecated"

    @property
    def path(self) -> str:
        """Where to read it now: ``cache.ttl_s``."""
        return f"{self.group}.{self.field}"

    @property
    def spelling(self) -> str:
        """How to write it now: ``cache=Cache(ttl_s=...)``."""
        return f"{self.group}={self.group_class}({self.field}=...)"


def _rows(owner: str, rows: Iterable[tuple[Any, ...]]) -> dict[str, Renamed]:
    return {r[0]: Renamed(owner, *r) for r in rows}


RENAMED: Mapping[str, Mapping[str, Renamed]] = {
    "ToolPolicy": _rows("ToolPolicy", [
        # old name                  group            class             field
        ("aliases",                   "args",            "Args",           "aliases", "kept"),
        ("unknown_args",              "args",            "Args",           "unknown"),
        ("journal",                   "journal",         "Journal",        "enabled", "shorthand"),
        ("journal_ttl_s",             "journal",         "Journal",        "ttl_s"),
        ("journal_lease_s",           "journal",         "Journal",        "lease_s"),
        ("dedup",                     "dedup",           "Dedup",          "mode", "shorthand"),
        ("dedup_key",                 "dedup",           "Dedup",          "key"),
        ("dedup_ttl",                 "dedup",           "Dedup",          "ttl_s"),
        ("dedup_max_entries",         "dedup",           "Dedup",          "max_entries"),
        ("dedup_looping_after",       "dedup",           "Dedup",          "looping_after"),
        ("cache_ttl_s",               "cache",           "Cache",          "ttl_s"),
        ("stale_max_age_s",           "fallback",        "Fallback",       "stale_s"),
        ("cache_max_entries",         "cache",           "Cache",          "max_entries"),
        ("cache_scope",               "cache",           "Cache",          "scope"),
        ("cache_key",                 "cache",           "Cache",          "key"),
        ("fallback_order",            "fallback",        "Fallback",       "order"),
        ("verify",                    "unknown_outcome", "UnknownOutcome", "verify"),
        ("verify_timeout",            "unknown_outcome", "UnknownOutcome", "verify_timeout"),
        ("on_unknown_outcome",        "unknown_outcome", "UnknownOutcome", "action"),
        ("hedge",                     "hedge",           "Hedge",          "delay", "shorthand"),
        ("max_hedges",                "hedge",           "Hedge",          "max_hedges"),
        ("hedge_budget",              "hedge",           "Hedge",          "budget"),
        ("hedge_min_delay",           "hedge",           "Hedge",          "min_delay"),
        ("result_checks",             "results",         "ResultChecks",   "checks", "kept"),
        ("on_low_quality",            "results",         "ResultChecks",   "on_low_quality", "kept"),
        ("max_consecutive_rollbacks", "results",         "ResultChecks",   "max_rollbacks"),
        ("detect_error_text",         "results",         "ResultChecks",   "detect_error_text"),
        ("max_concurrency",           "limits",          "Limits",         "max_concurrency"),
        ("rate_limit",                "limits",          "Limits",         "rate_limit"),
        ("deadline_s",                "timeouts",        "Timeouts",       "deadline"),
        ("adaptive_timeout",          "timeouts",        "Timeouts",       "adaptive"),
        ("max_abandoned_threads",     "timeouts",        "Timeouts",       "max_abandoned_threads"),
        ("isolate",                   "timeouts",        "Timeouts",       "isolate"),
        ("max_result_chars",          "output",          "Output",         "max_chars", "kept"),
        ("attach_record",             "output",          "Output",         "attach_record"),
        ("expose_error_details",      "output",          "Output",         "expose_error_details"),
        ("state_backend",             "shared",          "Shared",         "backend"),
        ("on_backend_error",          "shared",          "Shared",         "on_error"),
    ]),
    "RetryPolicy": _rows("RetryPolicy", [
        # ``budget_ratio=None`` (no budget) is ``budget=None``
        ("budget_ratio",              "budget",          "RetryBudget",    "ratio"),
        ("budget_min",                "budget",          "RetryBudget",    "min"),
        ("budget_window",             "budget",          "RetryBudget",    "window"),
    ]),
}  # fmt: skip
"""Every old flat name, per class: ``RENAMED["ToolPolicy"]["cache_ttl_s"].path`` is
``"cache.ttl_s"``."""

REMOVAL = "the old name will be removed in the next minor release"


def rows_for(owner: type) -> Mapping[str, Renamed]:
    """The table's rows for `owner` or the first of its bases that has some."""
    for klass in owner.__mro__:
        rows = RENAMED.get(klass.__name__)
        if rows is not None:
            return rows
    return {}


def fold(owner: Any, data: dict[str, Any], *, stacklevel: int) -> dict[str, Any]:
    """`data` (keyword arguments of `owner`) with its old names moved into their groups.

    A group given as well keeps what it sets explicitly; an old name for a field it
    sets too is an error. An old name for a group given as `None` when that turns the
    group off (``hedge=None``, ``budget=None``) changes nothing, as before; where `None`
    is a shorthand (``fallback=None``: no stub) the old name sets its field.
    """
    rows = rows_for(owner)
    moved = [rows[k] for k in data if k in rows and k not in owner.model_fields]
    if not moved:
        return data
    data = dict(data)
    updates: dict[str, dict[str, Any]] = {}
    for row in moved:
        value = data.pop(row.old)
        if row.kind == "deprecated":
            warnings.warn(
                f"{row.owner}({row.old}=...) is deprecated: write "
                f"{row.owner}({row.spelling}); {REMOVAL}",
                DeprecationWarning,
                stacklevel=stacklevel + 1,
            )
        if row.old == "budget_ratio" and value is None:
            data["budget"] = None  # no retry budget
            updates.pop("budget", None)
            continue
        if row.group not in data or owner.coerce_group(row.group, data[row.group]) is not None:
            updates.setdefault(row.group, {})[row.field] = value
    for group, fields in updates.items():
        data[group] = _merge_into(owner, group, data, fields)
    return data


def _merge_into(owner: Any, group: str, data: dict[str, Any], fields: dict[str, Any]) -> Any:
    if group not in data:
        return owner.group_class(group)(**fields)
    current = owner.coerce_group(group, data[group])
    if current is None:
        return None
    twice = sorted(fields.keys() & current.model_fields_set)
    if twice:
        rows = rows_for(owner)
        old = next(r.old for r in rows.values() if r.group == group and r.field == twice[0])
        raise UsageError(f"{old}= and {group}.{twice[0]} are the same option: give it once")
    explicit = {k: getattr(current, k) for k in current.model_fields_set}
    return type(current)(**explicit, **fields)


def readers(owner: Any) -> dict[str, Callable[[Any], Any]]:
    """For each old name of `owner` that is not a field any more, how to read it (with
    the warning): `core.frozen.Options.__getattr__` serves them, so that they stay out
    of ``help()``, of type checkers and of every normal attribute lookup."""
    return {
        row.old: _reader(row)
        for row in RENAMED.get(owner.__name__, {}).values()
        if row.old not in owner.model_fields
    }


def _reader(row: Renamed) -> Callable[[Any], Any]:
    group, field, warn = row.group, row.field, row.kind == "deprecated"
    message = f"{row.owner}.{row.old} is deprecated: read .{row.path}; {REMOVAL}"

    def read(self: Any) -> Any:
        if warn:  # from here: `read`, `Options.__getattr__`, the code reading it
            warnings.warn(message, DeprecationWarning, stacklevel=3)
        holder = getattr(self, group)
        if holder is None:  # a group that is off (``hedge=None``): its default
            holder = type(self).group_class(group)()
            if group == "budget":
                return None if field == "ratio" else getattr(holder, field)
        return getattr(holder, field)

    return read


def unknown_option(owner: Any, name: str) -> str:
    """The message for an option `owner` does not have, naming the closest valid one
    (a close old name is given in its new spelling)."""
    rows = rows_for(owner)
    valid = sorted({*owner.model_fields, *(r.old for r in rows.values() if r.kind == "kept")})
    close = difflib.get_close_matches(name, [*valid, *rows], n=1, cutoff=0.6)
    if not close:
        return f"{owner.__name__} has no option {name!r}. Its options: {', '.join(valid)}."
    best = close[0]
    if best in rows and rows[best].kind == "deprecated":
        return (
            f"{owner.__name__} has no option {name!r}. Did you mean {best!r} "
            f"(now {rows[best].spelling})?"
        )
    return f"{owner.__name__} has no option {name!r}. Did you mean {best!r}?"
