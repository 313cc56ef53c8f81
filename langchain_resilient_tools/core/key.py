"""The canonical key of a call: the same question asked twice has the same key.

`call_key` is dedup's: the tool name plus the model's arguments (injected ones
excluded) in a canonical form: keys sorted, strings with their whitespace normalised,
numbers and booleans as JSON writes them. `Dedup.key` narrows the arguments
to some fields, or computes the key. Dedup never reaches past one thread (see
`pipeline.dedup.logic.scope_of`), and within it serves a result only to a call that
could have produced it: the key also covers the tool's declared inputs and the runtime
context and ``configurable`` (two users on one thread never share a result).

`result_key` is the result cache's and the stale fallback's, which serve one call's
result to another call, possibly of another user: it adds everything the tool reads
besides the arguments and the scope a result is shared in. The rule is `core.reads`'s:
a result is served only to a call that could have produced it. A call with no thread
shares nothing unless ``cache_scope="global"``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .call import Call
from .digest import hex_digest
from .freshness import epoch
from .reads import ambient, declared_reads, key_info

log = logging.getLogger(__name__)


def canonical_text(value: str) -> str:
    """`value`'s words, one space apart: every run of whitespace (of any kind Unicode
    knows) one space, none at either end."""
    return " ".join(value.split())


def canonical(value: Any) -> Any:
    """`value` with dict keys sorted (by JSON) and string whitespace normalised
    (`canonical_text`)."""
    if isinstance(value, str):
        return canonical_text(value)
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def key_basis(call: Call) -> Any:
    """The part of the arguments that identifies the call (`Dedup.key`)."""
    spec = call.resolved.policy.dedup.key
    if spec is None:
        return canonical(call.args)
    if callable(spec):
        try:
            return canonical(spec(dict(call.args)))
        except Exception:  # a failing key function must not fail the call
            return canonical(call.args)
    return {name: canonical(call.args.get(name)) for name in spec}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    return hex_digest(text, 16)


def call_key(call: Call) -> str:
    """A short stable digest of the tool name, the canonical arguments and who asks: the
    tool's declared inputs (`core.reads.declared_reads`, less the whole state, which is
    the thread's own) and what any tool may read undeclared (`core.reads.ambient`: the
    runtime context and ``configurable``), and for a read in a thread the thread's write
    epoch (`core.freshness`: a read is not reused past a write that took effect). Values
    are digested, never kept.

    A call whose inputs cannot be digested is keyed by its own call id: it shares
    nothing, and the same call run again (a resumed step) still finds its own result.
    """
    try:
        reads = declared_reads(call, whole_state=False)
        parts = [call.name, key_basis(call), reads, ambient(call)]
        if call.resolved.idempotent and call.thread_id:  # a read: fresh since the last write
            parts.append(epoch(call.thread_id))
        return _digest(parts)
    except Exception:  # e.g. a circular value in the state: no sharing
        log.warning("the inputs of %s cannot be digested: no dedup across calls", call.name)
        return _digest([call.name, "call", call.id])


def result_key(call: Call) -> str | None:
    """The key under which `call`'s result is kept and looked up by the result cache and
    the stale fallback, or `None` when it must share nothing (its key function failed).

    A digest of: the tool name; the scope (``"thread"``: the thread id, the runtime
    context and ``configurable``, and the thread's write epoch, `core.freshness`;
    ``"global"``: nothing more); and what identifies the
    result (`Cache.key`'s value, else the canonical arguments and the
    declared inputs, `core.reads.declared_reads`). Values are digested, never kept.
    A call with no thread under the ``"thread"`` scope has no key: outside a thread
    nothing tells one caller from another.
    """
    found = call.result_key  # built once (`Call.result_key`)
    if found is not False:
        return found
    policy = call.resolved.policy
    if policy.cache.scope == "thread" and not call.thread_id:
        call.result_key = None
        return None
    scope: list[Any] = [policy.cache.scope]
    if policy.cache.scope == "thread":  # reused until the thread's next write
        scope += [call.thread_id, *ambient(call), epoch(call.thread_id)]
    key: str | None
    try:
        if policy.cache.key is not None:
            basis: list[Any] = ["key", policy.cache.key(key_info(call))]
        else:
            whole_state = policy.cache.scope == "global"
            basis = ["args", key_basis(call), declared_reads(call, whole_state=whole_state)]
        key = _digest([call.name, scope, basis])
    except Exception:  # a failing key function: this call shares nothing
        log.warning("cache_key of %s raised: the call is neither cached nor served", call.name)
        key = None
    call.result_key = key
    return key
