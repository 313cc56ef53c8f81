"""Model-side faults: the slips real models make in their tool calls.

`slip_call` applies one `Slip` to one tool call; `faulty_message` applies a
`ModelFaultPlan` to a whole `AIMessage` (slips on its calls, and sometimes a repeat of a
write that already succeeded); `FaultyChatModel` wraps any chat model so that every
message it returns goes through `faulty_message`. Draws are pure hashes, as in
`FaultPlan.draw`: the same conversation meets the same slips.

======================  ==========================================================
``CAMEL_CASE``          snake_case argument names sent as camelCase
                        (``order_id`` -> ``orderId``).
``NUMBER_AS_TEXT``      int and float values sent as strings (``2.0`` -> ``"2.0"``).
``JSON_TEXT``           the arguments arrive as JSON text the provider could not
                        parse: the call becomes an ``invalid_tool_call`` whose text
                        has one repairable defect (a trailing comma, or single
                        quotes).
``EXTRA_ARG``           one argument the tool does not declare
                        (``"note": "as requested"``).
======================  ==========================================================
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import ConfigDict, PrivateAttr

from .faults import unit_draws


class Slip(enum.StrEnum):
    """A mistake a model makes in one tool call (``str()`` is the value)."""

    CAMEL_CASE = "camel_case"
    NUMBER_AS_TEXT = "number_as_text"
    JSON_TEXT = "json_text"
    EXTRA_ARG = "extra_arg"


EXTRA_ARG = ("note", "as requested")
"""The argument `Slip.EXTRA_ARG` adds (the name gets a ``_`` prefix while it is taken)."""
REPEAT_SUFFIX = "-repeat"
"""Appended to a call's id to make the id of its repeat (a repeat is never repeated)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest) if head else name


def _json_text(args: Mapping[str, Any], call_id: str) -> str:
    """`args` as JSON with one defect a repair can undo: single quotes when no string
    holds a quote, and the call's id hashes even; else a trailing comma."""
    text = json.dumps(dict(args), ensure_ascii=False)
    quoted = "'" in text or '\\"' in text
    if args and not quoted and unit_draws("json_text", call_id)[1] % 2 == 0:
        return text.replace('"', "'")
    return text[:-1] + ",}" if args else "{,}"


def slip_call(tool_call: Mapping[str, Any], slip: Slip) -> dict[str, Any]:
    """A new tool call dict: `tool_call` with `slip` (for `Slip.JSON_TEXT`, an
    ``invalid_tool_call`` in LangChain's shape). Pure."""
    args: dict[str, Any] = dict(tool_call.get("args") or {})
    call_id = str(tool_call.get("id") or "")
    if slip is Slip.JSON_TEXT:
        return {
            "name": tool_call.get("name"),
            "args": _json_text(args, call_id),
            "id": tool_call.get("id"),
            "error": "Function arguments could not be parsed as JSON.",
            "type": "invalid_tool_call",
        }
    if slip is Slip.CAMEL_CASE:
        args = {_camel(k): v for k, v in args.items()}
    elif slip is Slip.NUMBER_AS_TEXT:
        number = (int, float)
        args = {k: str(v) if isinstance(v, number) and not isinstance(v, bool) else v
                for k, v in args.items()}  # fmt: skip
    elif slip is Slip.EXTRA_ARG:
        name, value = EXTRA_ARG
        while name in args:
            name = "_" + name
        args[name] = value
    return {**tool_call, "args": args}


def _probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1]; got {value!r}")


@dataclass(frozen=True, slots=True)
class ModelFaultPlan:
    """Which tool calls of a model slip, and when it repeats a write (validated at
    construction)."""

    p_slip: float = 0.3
    """Probability that a tool call has a slip."""
    p_repeat: float = 0.0
    """Probability that the model, right after a write succeeded, sends it again."""
    slips: tuple[Slip, ...] = tuple(Slip)
    """The slips drawn from, uniformly."""
    seed: int = 0
    writes: frozenset[str] | None = None
    """Tool names that are writes (only those are repeated); `None`: any tool."""

    def __post_init__(self) -> None:
        _probability("p_slip", self.p_slip)
        _probability("p_repeat", self.p_repeat)
        slips = tuple(Slip(s) for s in self.slips)
        if not slips:
            raise ValueError("slips must name at least one Slip")
        object.__setattr__(self, "slips", slips)
        if self.writes is not None:
            object.__setattr__(self, "writes", frozenset(self.writes))

    def draw_slip(self, call_id: str, name: str, n: int) -> Slip | None:
        """The slip of the call `call_id` to `name`, the `n`-th call of its message. Pure."""
        u, k = unit_draws(self.seed, "slip", call_id, name, n)
        return self.slips[k % len(self.slips)] if u < self.p_slip else None

    def draw_repeat(self, key: str) -> bool:
        """Whether the model repeats the write identified by `key`. Pure."""
        return unit_draws(self.seed, "repeat", key)[0] < self.p_repeat


def _last_write(history: Sequence[BaseMessage], writes: frozenset[str] | None) -> Any:
    """The last tool call of the last model turn in `history` that was answered with
    ``status="success"`` and is a write, if it is not itself a repeat."""
    answers: dict[str, ToolMessage] = {}
    for message in reversed(history):
        if isinstance(message, ToolMessage):
            answers[message.tool_call_id] = message
        elif isinstance(message, AIMessage):
            for call in reversed(message.tool_calls):
                answer = answers.get(str(call.get("id")))
                if answer is None or answer.status != "success":
                    continue
                if writes is not None and call["name"] not in writes:
                    continue
                return None if str(call.get("id")).endswith(REPEAT_SUFFIX) else call
            return None  # only the latest model turn counts
    return None


def faulty_message(
    message: AIMessage, plan: ModelFaultPlan, *, history: Sequence[BaseMessage] = ()
) -> AIMessage:
    """`message` with the faults of `plan`: a slip on some tool calls (`Slip.JSON_TEXT`
    moves a call into ``invalid_tool_calls``), and with `ModelFaultPlan.p_repeat` a copy
    (new id) of the write the previous turn of `history` ran with success."""
    calls: list[dict[str, Any]] = []
    invalid: list[Any] = list(message.invalid_tool_calls)
    for n, call in enumerate(message.tool_calls):
        slip = plan.draw_slip(str(call.get("id")), call["name"], n)
        changed = dict(call) if slip is None else slip_call(call, slip)
        (invalid if changed.get("type") == "invalid_tool_call" else calls).append(changed)
    write = _last_write(history, plan.writes) if plan.p_repeat else None
    if write is not None and plan.draw_repeat(str(write.get("id"))):
        calls.append({**write, "id": f"{write.get('id')}{REPEAT_SUFFIX}"})
    if calls == message.tool_calls and invalid == message.invalid_tool_calls:
        return message
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})


_QUIET: RunnableConfig = {"callbacks": []}
"""The inner model's config: no callbacks of the caller's, so that a streamed or traced
run shows one model answer (the faulty one), not the inner answer beside it."""


class FaultyChatModel(BaseChatModel):
    """Wraps any chat model (real or `ScriptedChatModel`): ``bind_tools`` passes to the
    inner model; every `AIMessage` it returns goes through `faulty_message` with the
    conversation as history."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    """The model that answers."""
    plan: ModelFaultPlan
    """The faults its answers get."""
    _bound: tuple[Sequence[Any], dict[str, Any]] | None = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return f"faulty-{self.inner._llm_type}"

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[Any, BaseMessage]:
        bound = self.model_copy()
        bound._bound = (list(tools), dict(kwargs))
        return bound

    def _model(self) -> Runnable[Any, BaseMessage]:
        if self._bound is None:
            return self.inner
        tools, kwargs = self._bound
        return self.inner.bind_tools(tools, **kwargs)

    def _result(self, answer: BaseMessage, messages: list[BaseMessage]) -> ChatResult:
        if isinstance(answer, AIMessage):
            answer = faulty_message(answer, self.plan, history=messages)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._result(self._model().invoke(messages, _QUIET, stop=stop), messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = await self._model().ainvoke(messages, _QUIET, stop=stop)
        return self._result(answer, messages)
