"""Result checks: a successful attempt whose result is useless fails with `LowQualityResult`.

Runs inside the retry stage, so ``on_low_quality="retry"`` re-runs idempotent tools (see
`pipeline.retry.stage.should_retry`); when the attempts run out, or for ``feedback``, the model
gets a ``low_quality_result`` envelope. ``rollback`` is carried out by the graph
adapters (`adapters.rollback`); everywhere else it degrades to that envelope.

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
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ..checks import Check
from ..core.call import Call
from ..core.errors import LowQualityResult, ToolRaised
from ..core.policy import ResolvedPolicy
from ..text.classify import error_result
from ..text.redact import redact
from ..text.truncate import text_of
from .stage import AsyncNext, Next, Stage

logger = logging.getLogger(__name__)

PREVIEW_CHARS = 200


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
