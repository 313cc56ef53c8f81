"""Scripted agents: chat models that play a task's ground-truth actions.

Both are `BaseChatModel`s (``bind_tools`` returns the model itself), so they run through
real graphs (`StateGraph`, `create_agent`). Each call decides the next `AIMessage` from
the conversation: how its last call was answered (the `ToolMessage` with that call's id,
or none).

- `blind`: sends the actions one per message, in order. After an error answer (a
  `ToolMessage` with ``status="error"``, or no answer at all) it sends the same call again
  under a new id, at most `MAX_RESENDS` times per action, then moves on. Then a final text.
- `careful`: reads the error envelope (JSON with ``error``, ``retryable`` and optionally
  ``check``). ``retryable`` true: sends again. ``unknown_outcome``: runs the check it is
  pointed to (the envelope's ``check``, else the domain's read for that write) and sends
  the write again only if the check shows the effect absent. ``duplicate_call``: moves on.
  Without an envelope (plain error text), an error on a write that may have gone through
  (anything but a refused connection, a 429/503 or a validation error) is checked the same
  way. A check the envelope names that cannot show the write (it reads the same before and
  after it, e.g. a user's accounts for a dispute) is replaced by the domain's check, as a
  model that reads it would notice (counted: `TaskAgent.blind_checks`). "Effect present"
  means the check read answers as it does on a shadow environment
  where the actions so far were each applied once. A write with no check is not sent
  again after an unknown outcome (a sensible model does not risk a duplicate it cannot
  see). Otherwise as `blind`, with the same limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, PrivateAttr

from .core import Action, Domain, DomainError, Task

MAX_RESENDS = 3
"""Re-sends per action (and per check) after an error."""

NOTHING_HAPPENED = re.compile(
    r"ConnectionRefused|refused|\b429\b|\b503\b|rate.?limit|Retry-After|unavailable"
    r"|validation error|Field required|Please fix",
    re.I,
)
"""Error texts (no envelope) that say the request did not take effect."""

AGENTS = ("blind", "careful")
STATE_KEY = "task_agent"
"""The ``additional_kwargs`` key of the agent's state in each of its messages."""


def parse_json(text: Any) -> Any:
    """The JSON value in a tool's answer (also when text surrounds it), else the text."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            return decoder.raw_decode(text, m.start())[0]
        except ValueError:
            continue
    return text.strip()


def envelope(message: ToolMessage) -> dict[str, Any] | None:
    """The error envelope of an error answer, or `None` (success, or plain text)."""
    if message.status != "error":
        return None
    try:
        data = json.loads(message.content) if isinstance(message.content, str) else None
    except ValueError:
        return None
    return data if isinstance(data, dict) and "error" in data else None


@dataclass
class _Pending:
    call_id: str
    action: Action
    checking: bool  # a check read for the current action, not the action itself


class TaskAgent(BaseChatModel):
    """Plays `task`'s actions as `kind` (``"blind"`` or ``"careful"``) would."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: str = "blind"

    _domain: Domain = PrivateAttr()
    _task: Task = PrivateAttr()
    _index: int = PrivateAttr(default=0)
    _resends: int = PrivateAttr(default=0)
    _check_resends: int = PrivateAttr(default=0)
    _serial: int = PrivateAttr(default=0)
    _pending: _Pending | None = PrivateAttr(default=None)
    _done: bool = PrivateAttr(default=False)
    _blind_checks: int = PrivateAttr(default=0)

    def __init__(self, *, domain: Domain, task: Task, kind: str = "blind") -> None:
        super().__init__(kind=kind)  # the domain and task stay out of the model's repr
        self._domain, self._task = domain, task

    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def task(self) -> Task:
        return self._task

    @property
    def blind_checks(self) -> int:
        """Checks the envelope named that cannot show the write (they read the same before
        and after it): the agent read the domain's check instead."""
        return self._blind_checks

    @property
    def _llm_type(self) -> str:
        return f"task-{self.kind}"

    @property
    def index(self) -> int:
        """The action being worked on (the shadow's `upto` is ``index + 1``)."""
        return self._index

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[Any, BaseMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.decide(messages))])

    # -- the decision ---------------------------------------------------------------------

    def decide(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self._restore(messages)
        pending = self._pending
        if pending is not None:
            answer = next(
                (
                    m
                    for m in reversed(messages)
                    if isinstance(m, ToolMessage) and m.tool_call_id == pending.call_id
                ),
                None,
            )
            self._pending = None
            if pending.checking:
                self._after_check(pending, answer)
            else:
                self._after_action(pending, answer)
        return self._next()

    def _next(self) -> AIMessage:
        if self._pending is not None:  # a check or a re-send was queued
            return self._send(self._pending)
        if self._index >= len(self.task.actions):
            self._done = True
            return AIMessage("Done.", additional_kwargs={STATE_KEY: self._state()})
        return self._send(_Pending("", self.task.actions[self._index], checking=False))

    def _send(self, pending: _Pending) -> AIMessage:
        self._serial += 1
        pending.call_id = f"{self.kind[0]}{self._serial}_{pending.action.name}"
        self._pending = pending
        call = {
            "name": pending.action.name,
            "args": dict(pending.action.args),
            "id": pending.call_id,
        }
        return AIMessage("", tool_calls=[call], additional_kwargs={STATE_KEY: self._state()})

    def _state(self) -> dict[str, Any]:
        """Where the agent is, carried in its own message (so a fresh process that
        resumes the conversation carries on from it)."""
        p = self._pending
        return {
            "index": self._index,
            "resends": self._resends,
            "check_resends": self._check_resends,
            "serial": self._serial,
            "pending": None
            if p is None
            else {
                "id": p.call_id,
                "name": p.action.name,
                "args": dict(p.action.args),
                "check": p.checking,
            },
        }

    def _restore(self, messages: Sequence[BaseMessage]) -> None:
        """Take up the state the agent's last message in `messages` carries, if any."""
        state = next(
            (
                m.additional_kwargs[STATE_KEY]
                for m in reversed(messages)
                if isinstance(m, AIMessage) and STATE_KEY in m.additional_kwargs
            ),
            None,
        )
        if state is None:
            return
        self._index, self._resends = state["index"], state["resends"]
        self._check_resends, self._serial = state["check_resends"], state["serial"]
        p = state["pending"]
        self._pending = (
            None if p is None else _Pending(p["id"], Action(p["name"], p["args"]), p["check"])
        )

    def _advance(self) -> None:
        self._index += 1
        self._resends = 0
        self._check_resends = 0

    def _resend(self) -> None:
        if self._resends >= MAX_RESENDS:
            self._advance()
            return
        self._resends += 1
        self._pending = _Pending("", self.task.actions[self._index], checking=False)

    def _after_action(self, pending: _Pending, answer: ToolMessage | None) -> None:
        if answer is not None and answer.status != "error":
            self._advance()
            return
        if self.kind == "blind" or answer is None:
            self._resend()
            return
        action = pending.action
        write = action.name in self.domain.writes
        env = envelope(answer)
        if env is not None:
            kind = env.get("error")
            if kind == "duplicate_call":
                self._advance()
            elif kind == "unknown_outcome":
                self._check(action, env.get("check"))
            else:  # retryable, or a mistake to fix: the intended call, again
                self._resend()
            return
        if write and not NOTHING_HAPPENED.search(str(answer.content)):
            self._check(action, None)
        else:
            self._resend()

    def _check(self, action: Action, pointed: Any) -> None:
        check: Action | None = None
        reads = self.domain.names - self.domain.writes
        if isinstance(pointed, dict) and pointed.get("tool") in reads:
            check = Action(pointed["tool"], dict(pointed.get("args") or {}))
            if not informative(self.domain, self.task, self._index, check):
                self._blind_checks += 1  # it cannot show this write: read what would
                check = None
        if check is None:
            check = self.domain.check_for(action)
        if check is None:  # nothing can show it: do not risk a duplicate
            self._advance()
            return
        self._pending = _Pending("", check, checking=True)

    def _after_check(self, pending: _Pending, answer: ToolMessage | None) -> None:
        if answer is None or answer.status == "error":
            if self._check_resends >= MAX_RESENDS:
                self._advance()  # cannot tell: do not risk a duplicate
                return
            self._check_resends += 1
            self._pending = _Pending("", pending.action, checking=True)
            return
        if effect_present(self.domain, self.task, self._index, pending.action, answer.content):
            self._advance()
        else:
            self._resend()


def _read(domain: Domain, task: Task, upto: int, check: Action) -> Any:
    try:  # a read: the shadow is not changed
        return parse_json(domain.call(domain.shadow(task, upto), check.name, check.args))
    except DomainError as exc:
        return str(exc)


def informative(domain: Domain, task: Task, index: int, check: Action) -> bool:
    """Whether `check` reads otherwise once action `index` was applied (once) than before."""
    return _read(domain, task, index, check) != _read(domain, task, index + 1, check)


def effect_present(domain: Domain, task: Task, index: int, check: Action, seen: Any) -> bool:
    """Whether the check read `seen` answers as it does once actions ``0..index`` were
    each applied once (a shadow run, no faults)."""
    return parse_json(seen) == _read(domain, task, index + 1, check)
