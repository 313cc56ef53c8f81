"""Options a user set that cannot take effect for a tool: said once, never dropped
without a word (DESIGN.md invariant 15).

A write (a tool not known to be safe to run twice) is never sent twice, so retries and
hedges do not apply to it. A tool named ``prices`` is not a known read: with
``ToolPolicy(retry=RetryPolicy(max_attempts=4))`` it would run once, and nothing would
say why. Each such option is said once per adapter and tool, as an
`IgnoredOptionWarning` naming the tool and the fix, at the adapter's construction when
it knows its tools, else at the tool's first call.

Only what the user set is reported (a field in the ``model_fields_set`` of a policy that
applies to the tool), never a default; and only where it surprises:

- an option set for this tool in particular (its pattern, or ``policies[name]``), or in
  a policy that also says the tool writes (``idempotent=False``, ``idempotency_key``),
  that cannot take effect there is always said;
- an option set for every tool (the default ``policy=``; a wrapper's ``policy=``, which
  is often one policy given to every wrapped tool) is said for a tool that is a write
  only because its name says nothing (neither `READ_PREFIXES` nor `WRITE_PREFIXES`:
  ``prices``), not for one whose name says it writes (``create_order``), where a
  retry for every tool was never meant to apply;
- a retry on a declared write (``idempotent=False``), or with ``retry_refused_writes``
  set, is left alone: a write is still retried when its service refuses a call with a
  rate limit, and the user who said so knows.

Decisions here are pure but for `warn_ignored`, which warns.
"""

from __future__ import annotations

import warnings
from collections.abc import MutableSet
from typing import Any, Literal

from .errors import IgnoredOptionWarning
from .policy import (
    READ_PREFIXES,
    WRITE_PREFIXES,
    PolicyResolver,
    ResolvedPolicy,
    ToolPolicy,
    infer_idempotent,
    name_words,
)

RETRY_IGNORED = (
    "{tool!r} is treated as a write ({why}), and a write is never sent twice: its retry "
    "(RetryPolicy(max_attempts={attempts})) {effect}. If {tool!r} is safe to run twice, "
    "say so: ToolPolicy(idempotent=True) for it (or an idempotency_key its service "
    "honours). If it is a write, declare it with idempotent=False to silence this."
)
RETRY_EFFECT = {
    True: (
        "applies only when its service refuses a call with a rate limit; a timeout or a "
        "connection error is not retried, since the write may have taken effect"
    ),
    False: "never applies (retry_refused_writes=False)",
}
HEDGE_IGNORED = (
    "{tool!r} is treated as a write ({why}): its hedge={hedge!r} never applies, since a "
    "hedge sends a call again while the first attempt still runs, and a write is never "
    "sent twice. {fix}"
)
HEDGE_FIX = {
    "keyed": "Remove hedge for it (a keyed write is retried with its key, never hedged).",
    "inferred": (
        "If {tool!r} only reads, say so: ToolPolicy(idempotent=True) for it; else remove "
        "hedge for it."
    ),
    "declared": "Remove hedge for it (ToolPolicy(hedge=None) in its own policy).",
}


def layers(resolver: PolicyResolver, name: str) -> tuple[ToolPolicy, list[ToolPolicy]]:
    """The policies the user gave that apply to tool `name`: the default ``policy=``,
    and those for this tool in particular (its pattern, then its own policy)."""
    pattern = resolver.pattern_for(name)
    own = [resolver.patterns.get(pattern) if pattern else None, resolver.policies.get(name)]
    return resolver.default, [p for p in own if p is not None]


def name_says(name: str) -> Literal["read", "write", ""]:
    """What the words of tool `name` say it is (`READ_PREFIXES`, `WRITE_PREFIXES`), or
    ``""`` when they say nothing (such a tool counts as a write)."""
    if infer_idempotent(name):
        return "read"
    words = name_words(name)
    heads = {"_".join(words[:n]) for n in (1, 2)}
    return "write" if heads & set(WRITE_PREFIXES) else ""


def _why(name: str, resolved: ResolvedPolicy) -> str:
    """Why tool `name` counts as a write, in a few words."""
    policy = resolved.policy
    if policy.idempotency_key is not False:
        return "a keyed write"
    if policy.idempotent is False:
        return "idempotent=False"
    if getattr(resolved, "classified_by", "name") == "annotations":
        return "its annotations say so"
    if name_says(name) == "write":
        return "its name says so"
    reads = ", ".join(f"{p}_" for p in READ_PREFIXES[:5])
    return f"its name does not mark it as a read: {reads}..."


def _said_for(resolver: PolicyResolver, name: str, resolved: ResolvedPolicy, field: str) -> bool:
    """Whether an option `field` the user set cannot take effect on `name` (a write) in a
    way worth saying: set for this tool in particular, or in a policy that also says the
    tool writes (a contradiction), or for every tool while this one is a write only
    because its name says nothing (the surprise: ``prices``). A global option on a tool
    whose name or policy says it writes was never meant for it."""
    default, own = layers(resolver, name)
    setting = [p for p in (default, *own) if field in p.model_fields_set]
    if any(p is q for p in setting for q in own):
        return True
    if any(p.idempotent is False or p.idempotency_key is not False for p in setting):
        return True
    policy = resolved.policy
    inferred = policy.idempotent is None and policy.idempotency_key is False
    named = getattr(resolved, "classified_by", "name") == "name"
    return bool(setting) and inferred and named and name_says(name) == ""


def ignored_options(resolver: PolicyResolver, name: str, resolved: ResolvedPolicy) -> list[str]:
    """What the user set for tool `name` that cannot take effect, one sentence each."""
    policy = resolved.policy
    said: list[str] = []
    retry: Any = policy.retry
    attempts = getattr(retry, "max_attempts", 1)
    refused = bool(getattr(retry, "retry_refused_writes", False))
    # Who said how writes are retried knows: a declared write is retried when refused.
    addressed = "retry_refused_writes" in getattr(retry, "model_fields_set", ()) or (
        policy.idempotent is False and refused
    )
    if (
        not resolved.idempotent
        and attempts > 1
        and not addressed
        and _said_for(resolver, name, resolved, "retry")
    ):
        why, effect = _why(name, resolved), RETRY_EFFECT[refused]
        said.append(RETRY_IGNORED.format(tool=name, why=why, attempts=attempts, effect=effect))
    hedge = policy.hedge
    if hedge is not None and resolved.write and _said_for(resolver, name, resolved, "hedge"):
        kind = (
            "keyed"
            if policy.idempotency_key is not False
            else "declared"
            if policy.idempotent is False
            else "inferred"
        )
        fix = HEDGE_FIX[kind].format(tool=name)
        delay = getattr(hedge, "delay", hedge)  # the grouped `Hedge`, or a bare delay
        said.append(HEDGE_IGNORED.format(tool=name, why=_why(name, resolved), hedge=delay, fix=fix))
    return said


def warn_ignored(
    said: MutableSet[str],
    resolver: PolicyResolver,
    name: str,
    resolved: ResolvedPolicy,
    *,
    stacklevel: int = 2,
) -> None:
    """Warn (`IgnoredOptionWarning`) about the options set for tool `name` that cannot
    take effect, unless `said` (the adapter's) shows it was done for `name` already."""
    if name in said or resolved.rerun:
        return
    said.add(name)
    for text in ignored_options(resolver, name, resolved):
        warnings.warn(text, IgnoredOptionWarning, stacklevel=stacklevel + 1)
