"""Dangling tool calls: model messages whose calls a stopped run left without an answer.

A run that stops between a model message and its calls' answers (a client cancelled it,
Ctrl+C, a person never answered an interrupt, its worker died) leaves an ``AIMessage``
whose calls no ``ToolMessage`` answers. A new run of the thread (a new user message)
does not run them (LangGraph drops the stopped run's pending tasks), and the next model
call is refused: providers require every call of a message to be answered right after
it (OpenAI, Anthropic and others check the whole history, not only the last message).

`answer_gaps` answers each such call with what the write journal knows, and runs
nothing (`recover.settle`, through `Pipeline.settle_unanswered`): a write with a receipt
gets the answer it got then (marked, ``served_by="journal"``); a write with an intent
and no receipt ``unknown_outcome`` (with the check that tells whether it took effect); a
call that never started, or a read, ``not_run`` (retryable). A write that no journal
could tell about is ``unknown_outcome``: never a blind "cancelled". The steps where a
message's calls may have run are read off the thread's checkpoints (`made`). Where the
answers go in the graph state is the adapters' (`adapters.dangling`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage

from ...core.call import Call
from ...core.tools import thread_id_of
from ...text.envelope import failure_message, success_message
from ..step import Outcome
from .made import where_made

Gap = tuple[int, list[Any]]
"""A model message with calls nothing answers: its index, and those calls."""
Settle = Callable[[Call, "Sequence[str] | None", "float | None"], Outcome]
"""`Pipeline.settle_unanswered`: a call's answer from its journal, nothing run."""
Seen = Callable[[Outcome, ToolMessage], None]
"""Told each dangling call's outcome and the answer made of it."""
_AI = ("ai", "AIMessageChunk")


def dangling(messages: Sequence[Any]) -> list[Gap]:
    """The model messages of `messages` with calls that no later `ToolMessage` answers
    (their ``tool_calls`` and ``invalid_tool_calls``), oldest first."""
    gaps: list[Gap] = []
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):  # runs before every model call: kept lean
        message = messages[i]
        kind = getattr(message, "type", None)
        if kind == "tool":
            answered.add(message.tool_call_id)
        elif kind in _AI and (message.tool_calls or message.invalid_tool_calls):
            calls = (*message.tool_calls, *message.invalid_tool_calls)
            left = [c for c in calls if c.get("id") and c["id"] not in answered]
            if left:
                gaps.append((i, left))
    gaps.reverse()
    return gaps


def _answer(
    new_call: Callable[..., Call], settle: Settle, tools: Mapping[str, Any],
    tc: Mapping[str, Any], steps: Sequence[str] | None, at: float | None, config: Any,
    store: Any, state: Any, seen: Seen,
) -> ToolMessage:  # fmt: skip
    name = tc.get("name") or ""
    args = tc.get("args")
    call = new_call(
        call_id=tc["id"],
        name=name,
        args=dict(args) if isinstance(args, Mapping) else {},
        tool=tools.get(name),
        valid_tools=tuple(tools),
        raw_args=None if isinstance(args, Mapping) else args,
        thread_id=thread_id_of(config),
        config=config,
        store=store,
        state=state,
    )
    # A call the model could not format never reached a tool: it ran nowhere.
    malformed = tc.get("type") == "invalid_tool_call"
    outcome = settle(call, () if malformed else steps, at)
    if outcome.failure is not None:
        answer = failure_message(outcome.failure, outcome.call)
    else:
        made = success_message(outcome.value, outcome.call)
        assert isinstance(made, ToolMessage), "a receipt keeps text only"
        answer = made
    seen(outcome, answer)
    return answer


def answer_gaps(
    new_call: Callable[..., Call], settle: Settle, tools: Mapping[str, Any],
    messages: Sequence[Any], *, config: Any, store: Any, tools_node: str, messages_key: str,
    state: Any, seen: Seen,
) -> list[tuple[int, list[ToolMessage]]]:  # fmt: skip
    """The index of each dangling model message of `messages`, with the answers to its
    unanswered calls (`new_call`, `settle`: the pipeline's; `state`: the graph state the
    messages are in, which the calls carry, as any call does; `seen`: told each call's
    outcome and answer)."""
    gaps = dangling(messages)
    if not gaps:
        return []
    ids = [mid for index, _calls in gaps if (mid := messages[index].id)]
    made = where_made(config, ids, tools_node, messages_key)
    out = []
    for index, calls in gaps:
        where = made.get(messages[index].id or "")
        steps, at = (where.steps, where.at) if where is not None else (None, None)
        answers = [
            _answer(new_call, settle, tools, tc, steps, at, config, store, state, seen)
            for tc in calls
        ]
        out.append((index, answers))
    return out
