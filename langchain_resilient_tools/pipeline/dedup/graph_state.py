"""The dedup ledger in graph state (``tool_ledger``): entries that point at messages.

Stages cannot write graph state: `persist` leaves an entry on the call
(`Call.ledger`), the call's answer carries it to the end of its step (`LEDGER_META`,
`answered_entries`), and the step's update holds it for the adapter to write
(`take_entries`; see `pipeline.step`). The thread's messages already hold the results, so an entry does
not copy them: an entry whose result is the content of the `ToolMessage` that answered
its call keeps only that call's id and a few fields (`state_form`, `answered_entries`),
and its content is read back from the message (`state_entry`). Only what the messages
do not hold as it is (an answer that was cut, or marked with a notice) is kept, capped.

A result whose message is gone from the thread (trimmed, or summarized away with
`RemoveMessage`) is not reused (`state_entry`, `forget_if_gone`): a read runs again; a
write's entry still blocks a repeat, without showing the result (``done``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage

from ...core.call import Call
from ...state.graph import LEDGER_KEY, has_ledger
from ...text.truncate import truncate
from .logic import Entry

LEDGER_META = "lrt_ledger"
"""``response_metadata`` key carrying a call's ledger entries to the end of the step."""
STATE_CONTENT_CHARS = 8000
"""Cap on a result kept in graph state for reuse (unless `max_result_chars` is lower)."""


_MISSING: Any = object()
_POINTER_KEYS = frozenset({"status", "repeats", "at", "call_id", "pos"})
"""What an entry that points at its message keeps (``repeats`` only when not 0)."""


def _messages(state: Any) -> list[Any] | None:
    """The thread's messages, when the call came with a graph state that has them."""
    messages = state.get("messages") if isinstance(state, Mapping) else None
    return messages if isinstance(messages, list) else None


def answer_content(messages: list[Any] | None, call_id: str) -> Any:
    """The content of the successful `ToolMessage` answering `call_id` in `messages`,
    or `_MISSING` (also when there are no messages to look in)."""
    for message in reversed(messages or ()):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message.content if message.status != "error" else _MISSING
    return _MISSING


def state_form(data: dict[str, Any], answer: Any, cap: int | None) -> dict[str, Any]:
    """`data`, a persisted entry, as graph state keeps it: without its content when
    `answer` (the content of the message answering the entry's call) is that content,
    so that the entry points at the message by its call id; else with the content cut
    to `STATE_CONTENT_CHARS` (or `cap`, `max_result_chars`, when lower)."""
    content = data.get("content")
    if content is None:
        return data
    if answer is not _MISSING and answer == content:  # a pointer: only what restore reads
        return {k: v for k, v in data.items() if k in _POINTER_KEYS and (v or k != "repeats")}
    limit = min(cap or STATE_CONTENT_CHARS, STATE_CONTENT_CHARS)
    return {**data, "content": truncate(content, limit)}


def answered_entries(entries: Mapping[str, Any], answer: ToolMessage, call: Call) -> dict[str, Any]:
    """The ledger entries `call` left (`Call.ledger`) as graph state keeps
    them, now that `answer` is its message: the entry of the call's own result points at
    `answer` when that holds the result as it is (and the state has the thread's
    messages to find it in later), else keeps a capped copy (`state_form`)."""
    findable = _messages(call.state) is not None and answer.status != "error"
    cap = call.resolved.policy.output.max_chars
    out: dict[str, Any] = {}
    for key, data in entries.items():
        if data.get("call_id") == answer.tool_call_id and "content" in data:
            data = state_form(data, answer.content if findable else _MISSING, cap)
        out[key] = data
    return out


def pointing_like(data: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """`data`, pointing at its result's message as `other`, another word on the same
    key and result, does (`other` has no content: it was found in the thread)."""
    same = data.get("call_id") == other.get("call_id") and data.get("status") == "ok"
    if same and "content" in data and "content" not in other and other.get("status") == "ok":
        return state_form(data, data["content"], None)
    return data


def take_entries(messages: Sequence[ToolMessage]) -> dict[str, Any]:
    """The ledger entries the messages carry (taken off their metadata)."""
    entries: dict[str, Any] = {}
    for msg in messages:
        for key, data in (msg.response_metadata.pop(LEDGER_META, None) or {}).items():
            old = entries.get(key)
            if old is None:
                entries[key] = data
                continue
            # The most repeats is the latest word on a key; it points at the message
            # holding the result when the other word on it does (twins of one step).
            newer, other = (
                (data, old) if data.get("repeats", 0) >= old.get("repeats", 0) else (old, data)
            )
            entries[key] = pointing_like(newer, other)
    return entries


def state_entry(state: Any, key: str) -> Entry | None:
    """The entry for `key` in the graph state's ``tool_ledger``, if any; an entry that
    points at a message gets its content from it, or is ``done`` if it is gone."""
    if not isinstance(state, Mapping):
        return None
    ledger = state.get(LEDGER_KEY)
    section = ledger.get("dedup") if isinstance(ledger, Mapping) else None
    data = section.get(key) if isinstance(section, Mapping) else None
    if not isinstance(data, Mapping):
        return None
    entry = Entry.restore(data)
    if entry is not None and entry.status == "ok" and "content" not in data:
        content = answer_content(_messages(state), entry.call_id)
        if content is _MISSING:
            entry.status = "done"  # its result is gone from the thread: not reused
        else:
            entry.content = content
    return entry


def forget_if_gone(call: Call, entry: Entry) -> None:
    """An entry of an earlier step whose message the thread no longer holds (trimmed,
    summarized) is ``done``: its result is not reused (a read runs again, a write is
    still blocked). Checked only where the call sees the thread's messages."""
    if entry.status != "ok" or entry.landed or entry.call_id in (call.id, call.twin_of):
        return  # not a result, one no message holds (landed after a timeout), or this
        # call's or its twin's own (also when a step resumes)
    if entry.step is not None and entry.step == call.step:
        return  # made in this very step: its message is not in the thread yet
    messages = _messages(call.state)
    if messages is not None and answer_content(messages, entry.call_id) is _MISSING:
        entry.status, entry.content = "done", None


def persist(call: Call, key: str, entry: Entry) -> None:
    """Leave the finished `entry` of `key` on `call` for the adapter to write to the
    graph state (only for a state that keeps a ledger)."""
    if entry.status == "pending" or not has_ledger(call.state):
        return
    data = entry.persisted(call.name)
    if entry.call_id != call.id:  # a repeat: the earlier call's message is in the thread
        answer = answer_content(_messages(call.state), entry.call_id)
        data = state_form(data, answer, call.resolved.policy.output.max_chars)
    # else the call ran now: `answered_entries` compares the content with its answer
    if call.ledger is None:
        call.ledger = {}
    call.ledger[key] = data
