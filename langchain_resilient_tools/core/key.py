"""The canonical key of a call: the same question asked twice has the same key.

Used by dedup, the result cache and the stale cache. The key is the tool name plus the
model's arguments (injected ones excluded) in a canonical form: keys sorted, strings
with their whitespace normalised, numbers and booleans as JSON writes them.
`ToolPolicy.dedup_key` narrows the arguments to some fields, or computes the key.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .call import Call

_SPACE = re.compile(r"\s+")


def canonical(value: Any) -> Any:
    """`value` with dict keys sorted (by JSON) and string whitespace normalised."""
    if isinstance(value, str):
        return _SPACE.sub(" ", value).strip()
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def key_basis(call: Call) -> Any:
    """The part of the arguments that identifies the call (`ToolPolicy.dedup_key`)."""
    spec = call.resolved.policy.dedup_key
    if spec is None:
        return canonical(call.args)
    if callable(spec):
        try:
            return canonical(spec(dict(call.args)))
        except Exception:  # a failing key function must not fail the call
            return canonical(call.args)
    return {name: canonical(call.args.get(name)) for name in spec}


def call_key(call: Call) -> str:
    """A short stable digest of (tool name, canonical arguments)."""
    text = json.dumps(
        [call.name, key_basis(call)], sort_keys=True, default=str, separators=(",", ":")
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
