"""Journal decisions: the entries' shapes and what an entry found before a write means.
No I/O here.

An entry is a `state.backend.Record` (a dict of JSON values, which a store keeps as it
is) kept under the call's idempotency key (thread, tool, tool call
id, step: `core.idempotency.key_for`) and the step of the thread that issued the call
(`core.resume.step_of`), in the namespace `NS_JOURNAL`:

- an **intent**, written (claimed) before the write runs: the tool, a digest of the
  arguments (never the values), the step, when it started, its `owner`
  (`runtime.owner.me`) and the lease that owner renews while the write runs;
- a **receipt**, written when the call answers: how it ended and the answer the model
  got (text capped like any kept result, or the error envelope's fields).

`judge` reads an entry found in place of a fresh claim. An entry made for other
arguments is not this call's (a fork of the thread sent the same call id with other
arguments): it is read as nothing there.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ...core.digest import hex_digest
from ...core.key import canonical, canonical_text
from ...core.resume import step_digest
from ...runtime.owner import alive
from ...state.backend import Record
from ...text.classify import Failure
from ...text.envelope import content_of
from ...text.truncate import truncate

NS_JOURNAL = "journal"
"""Namespace of journal entries on a backend."""
RECEIPT_CHARS = 8000
"""Cap on an answer kept in a receipt (unless `max_result_chars` is lower)."""


class Verdict(enum.Enum):
    """What an entry found before a write means."""

    NEW = "new"
    """Nothing (or nothing readable) is there: the write may be claimed."""
    RECEIPT = "receipt"
    """The call answered before: answer from the receipt, run nothing."""
    RUNNING = "running"
    """Its owner is alive and holds its lease: wait for the receipt."""
    ORPHANED = "orphaned"
    """Its owner is gone (or its lease ran out) before a receipt: the outcome is unknown."""


def entry_key(tool: str, idempotency_key: str, step: str, *, rerun: bool = False) -> str:
    """The key of a call's entry: its tool, idempotency key and step (`step_digest`); a
    run a person chose (`rerun`) is journaled apart from the first, which stays answered."""
    return f"{tool}:{idempotency_key}:{step_digest(step)}{':rerun' if rerun else ''}"


_ARGS_JSON = json.JSONEncoder(sort_keys=True, default=str)
"""How `args_digest` writes the arguments (made once: `json.dumps` with options builds an
encoder on every call)."""


def args_digest(args: Mapping[str, Any]) -> str:
    """A digest of `args` made canonical (`core.key.canonical`), stable across processes
    and versions (a resumed run compares it with the one its intent kept)."""
    text = _flat_json(args) if type(args) is dict else None
    if text is None:
        text = _ARGS_JSON.encode(canonical(args if type(args) is dict else dict(args)))
    return hex_digest(text, 12)


_JSON_STR = json.encoder.encode_basestring_ascii
_JSON_CONST: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _flat_json(args: dict[str, Any]) -> str | None:
    """The text `_ARGS_JSON` writes for `canonical(args)` when every key is a str and
    every value a str, an int, a bool or `None` (most tool calls), without building an
    encoder and a canonical copy first; `None` for anything else."""
    parts = []
    try:
        names = sorted(args)
    except TypeError:  # keys of several types
        return None
    for name in names:
        value = args[name]
        kind = type(value)
        if type(name) is not str:
            return None
        if kind is str:
            text = _JSON_STR(canonical_text(value))
        elif kind is int:
            text = int.__repr__(value)
        elif kind is bool or value is None:
            text = _JSON_CONST[value]
        else:
            return None
        parts.append(f"{_JSON_STR(name)}: {text}")
    return "{" + ", ".join(parts) + "}"


def intent(
    tool: str, args: Mapping[str, Any], *, owner: Mapping[str, Any], now: float, lease: float,
    step: str | None = None, digest: str | None = None,
) -> Record:  # fmt: skip
    """The intent of a write about to run (in `step` of its thread); `digest`: its
    arguments' `args_digest`, when the caller has it."""
    return Record(
        kind="intent",
        tool=tool,
        args=args_digest(args) if digest is None else digest,
        step=step,
        started=now,
        owner=owner if type(owner) is dict else dict(owner),
        lease_until=now + lease,
    )


def renewed(entry: Mapping[str, Any], *, now: float, lease: float) -> Record:
    return Record(entry, lease_until=now + lease)


def abandoned(entry: Mapping[str, Any]) -> Record:
    """An intent whose call was cut short in a live worker (cancelled): orphaned now."""
    return Record(entry, lease_until=0.0)


def receipt(
    entry: Mapping[str, Any], *, now: float, value: Any = None, failure: Failure | None = None,
    cap: int | None = None,
) -> Record:  # fmt: skip
    """The receipt of a write that answered: its value as text, or its failure."""
    done = Record(entry, kind="receipt", ended=now)
    done.pop("owner", None)
    done.pop("lease_until", None)
    if failure is not None:
        done["outcome"] = "error"
        done["failure"] = {
            "error": failure.error.value,
            "message": failure.message,
            "suggestion": failure.suggestion,
            "retryable": failure.retryable,
            "extra": {k: v for k, v in failure.extra.items() if _plain(v)},
        }
        return done
    done["outcome"] = "success"
    if isinstance(value, ToolMessage):  # most answers (a type checked at once)
        content = value.content
    elif isinstance(value, Command):
        done["content"] = None  # a state update cannot be given again
        return done
    else:
        content = content_of(value)
    limit = min(cap or RECEIPT_CHARS, RECEIPT_CHARS)
    if type(content) is str and len(content) <= limit:  # most answers: kept as they are
        done["content"] = content
        return done
    done["content"] = truncate(content, limit)
    return done


def _plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def judge(entry: Any, now: float, args: str | None = None) -> Verdict:
    """What `entry` (found under the call's key) means at wall time `now` to a call whose
    arguments have the digest `args` (`None`: not compared)."""
    if not isinstance(entry, Mapping):
        return Verdict.NEW
    if args is not None and entry.get("args") != args:
        return Verdict.NEW  # another call's entry: never its answer
    if entry.get("kind") == "receipt":
        return Verdict.RECEIPT
    if entry.get("kind") != "intent":
        return Verdict.NEW
    owner = entry.get("owner")
    lease_until = float(entry.get("lease_until") or 0.0)
    if alive(owner if isinstance(owner, Mapping) else None, lease_until, now):
        return Verdict.RUNNING
    return Verdict.ORPHANED
