"""Result checks: a successful attempt whose result is useless fails with `LowQualityResult`.

Runs inside the retry stage, so ``on_low_quality="retry"`` re-runs idempotent tools (see
`pipeline.retry.stage.should_retry`); when the attempts run out, or for ``feedback``, the model
gets a ``low_quality_result`` envelope. For ``rollback`` the answer carries the wish to
the end of its step (`mark_answer`, `close_step`: a `pipeline.step.Rollback`), which the
graph adapters carry out (`adapters.rollback`); everywhere else it degrades to that envelope.

What the user configured wins over a default: the policy's own checks judge a result
first, and only a result none of them flags meets the default error-text detection
(``detect_error_text``: a text such as ``Error: ...`` is a ``tool_error``). So with
``result_checks=[error_prefix()]`` and ``on_low_quality="retry"`` an ``Error ...`` text
is retried, rolled back or answered ``low_quality_result`` as the policy says, whatever
the order of the checks. Without checks the detection runs at the end of the attempt
(`pipeline.driver`). An error the tool answered itself (a ``ToolMessage`` with
``status="error"``, from its own ``handle_tool_error``) is the tool's answer and never
reaches the checks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ..checks import Check
from ..core.call import Call
from ..core.errors import LowQualityResult, ToolErrorType, ToolRaised
from ..core.policy import ResolvedPolicy
from ..text import messages as m
from ..text.envelope import ERROR_META
from ..text.redact import redact
from ..text.reported import error_result
from ..text.truncate import text_of
from .stage import AsyncNext, Next, Stage
from .step import Outcome, Rollback, Step, StepUpdate

logger = logging.getLogger(__name__)

PREVIEW_CHARS = 200
ROLLBACK_META = "lrt_rollback"
"""``response_metadata`` key of a low-quality answer whose policy asks for a rollback."""
_LOW = ToolErrorType.LOW_QUALITY_RESULT


def preview_text(content: Any) -> str:
    """What came back, as text: the text of content blocks, else JSON."""
    blocks = isinstance(content, list) and content and all(isinstance(b, dict) for b in content)
    if isinstance(content, str) or blocks:
        return text_of(content)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def first_reason(checks: Sequence[Check], value: Any) -> str | None:
    """The reason of the first check that fires on `value` (a result), or `None`.

    A check that raises is logged and treated as passing: a broken check must not turn
    a good result, perhaps of a write that took effect, into a failure.
    """
    content = value.content if isinstance(value, ToolMessage) else value
    for check in checks:
        subject = value if getattr(check, "__lrt_wants_message__", False) else content
        try:
            reason = check(subject)
        except Exception:
            logger.warning("result check %r raised; treated as passing", check, exc_info=True)
            continue
        if reason:
            return redact(str(reason), limit=200)
    return None


def judge(call: Call, value: Any) -> None:
    """Raise `LowQualityResult` when a check of `call`'s policy fires on `value`; else,
    with ``detect_error_text``, `ToolRaised` when `value` reads as an error report."""
    policy = call.resolved.policy
    if not policy.results.checks or isinstance(value, Command):
        return
    reason = first_reason(policy.results.checks, value)
    if reason is not None:
        content = value.content if isinstance(value, ToolMessage) else value
        preview = redact(preview_text(content), limit=PREVIEW_CHARS)
        raise LowQualityResult(reason, preview=preview, value=value)
    if policy.results.detect_error_text:  # the default, after what the user configured
        reported = error_result(value)
        if reported is not None:
            raise ToolRaised(reported)


class ChecksStage(Stage):
    name = "checks"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return bool(resolved.policy.results.checks)

    def wrap(self, call: Call, call_next: Next) -> Any:
        value = call_next(call)
        judge(call, value)
        return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        value = await call_next(call)
        judge(call, value)
        return value

    def mark_answer(self, outcome: Outcome, message: ToolMessage) -> Mapping[str, Any] | None:
        """A low-quality answer whose policy asks for a rollback carries that wish."""
        if not wants_rollback(outcome):
            return None
        bound = outcome.call.resolved.policy.results.max_rollbacks
        return {ROLLBACK_META: {"guidance": guidance(outcome), "max": bound}}

    def close_step(
        self, step: Step, messages: Sequence[ToolMessage], update: StepUpdate, keep: bool
    ) -> None:
        marks: list[Mapping[str, Any]] = []
        for msg in messages:
            meta = msg.response_metadata
            mark = meta.get(ROLLBACK_META) if keep else meta.pop(ROLLBACK_META, None)
            if isinstance(mark, Mapping):
                marks.append(mark)
            if (meta.get(ERROR_META) or {}).get("error") == _LOW.value:
                update.low_quality = True
        if marks:
            texts = tuple(dict.fromkeys(str(mark["guidance"]) for mark in marks))
            update.rollback = Rollback(texts, min(int(mark.get("max", 0)) for mark in marks))


def wants_rollback(outcome: Outcome) -> bool:
    failure = outcome.failure
    return (
        failure is not None
        and failure.error is _LOW
        and outcome.call.resolved.policy.results.on_low_quality == "rollback"
    )


def guidance(outcome: Outcome) -> str:
    """What the model is told instead of the rolled-back step."""
    call = outcome.call
    args = redact(json.dumps(call.args, ensure_ascii=False, default=str), limit=160)
    reason = outcome.failure.message if outcome.failure else ""
    return m.ROLLBACK_GUIDANCE.format(tool=call.name, args=args, reason=reason)
