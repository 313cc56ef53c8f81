"""Result checks: a successful attempt whose result is useless fails with `LowQualityResult`.

Runs inside the retry stage, so ``on_low_quality="retry"`` re-runs idempotent tools (see
`pipeline.retry.stage.should_retry`); when the attempts run out, or for ``feedback``, the model
gets a ``low_quality_result`` envelope. ``rollback`` is carried out by the graph
adapters (`adapters.rollback`); everywhere else it degrades to that envelope.
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
from ..core.errors import LowQualityResult
from ..core.policy import ResolvedPolicy
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
    """Raise `LowQualityResult` when a check of `call`'s policy fires on `value`."""
    checks = call.resolved.policy.result_checks
    if not checks or isinstance(value, Command):
        return
    reason = first_reason(checks, value)
    if reason is not None:
        content = value.content if isinstance(value, ToolMessage) else value
        preview = redact(preview_text(content), limit=PREVIEW_CHARS)
        raise LowQualityResult(reason, preview=preview, value=value)


class ChecksStage(Stage):
    name = "checks"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return bool(resolved.policy.result_checks)

    def wrap(self, call: Call, call_next: Next) -> Any:
        value = call_next(call)
        judge(call, value)
        return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        value = await call_next(call)
        judge(call, value)
        return value
