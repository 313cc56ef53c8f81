"""Observers of finished calls: statistics, OpenTelemetry, and LangChain callbacks.

`Observer` belongs to one `Pipeline`. For every finished call it builds a `CallEvent`
from the call's record, counts it in `stats`, exports it through OpenTelemetry (when
installed), and dispatches a ``resilience`` custom event to the LangChain callbacks of
the run the call belongs to, so traces (LangSmith, ...) show attempts, repairs and
fallbacks. Observers never make a call fail.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from functools import partial
from typing import Any

from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    var_child_runnable_config,
)

from ..core.call import CallRecord
from . import otel as _otel
from .stats import UNKNOWN_TOOL_LABEL, CallEvent, Stats
from .tracing import TraceSetting, without_values

_new_event = partial(tuple.__new__, CallEvent)
"""``CallEvent._make`` without its Python frame (the values are all there, in order)."""

EVENT_NAME = "resilience"
"""Name of the LangChain custom event dispatched for every finished call."""

log = logging.getLogger(__name__)


class Observer:
    """Feeds the statistics and exporters of one pipeline."""

    def __init__(self) -> None:
        self.stats = Stats()
        self.payloads: TraceSetting = "full"
        """``"omit"``: the events and spans leave out the value a repair parsed (the
        adapter's ``trace_policy="omit"``, see `observe.tracing`)."""

    def observe(
        self,
        record: CallRecord,
        *,
        known_tool: bool = True,
        span: Any = None,
    ) -> CallEvent:
        """Count the finished call of `record` and export it (`span`: the call's live
        OpenTelemetry span, ended here; without one a span is made for the record).

        A call to a tool that does not exist (`known_tool` false) is counted under
        `UNKNOWN_TOOL_LABEL`: the names a model invents never become rows or labels.
        The breaker state is the one the breaker stage left on the record
        (`CallRecord.breaker`).
        """
        error = record.error
        repairs = tuple(record.repairs) if record.repairs else ()
        if repairs and self.payloads == "omit":
            repairs = without_values(repairs)
        event = _new_event(  # its values in field order: no keywords to bind
            (
                record.tool if known_tool else UNKNOWN_TOOL_LABEL,
                record.call_id,
                record.outcome,
                error.value if error else None,
                record.attempts,
                record.duration_ms,
                repairs,
                record.served_by,
                record.breaker,
                record.started_at,
                record.hedges,
                record.hedge_won,
                record.hedge_winner,
                record.classified_as if known_tool else None,
                record.classified_by if known_tool else None,
            ),
        )
        opened = self.stats.add(event)
        _otel.emit(event, breaker_opened=opened, span=span)
        return event

    def dispatch(self, event: CallEvent) -> None:
        """Send `event` to the callbacks of the current LangChain run, if there is one."""
        manager = _parent_manager()
        if manager is None:
            return
        try:
            manager.on_custom_event(EVENT_NAME, event.as_dict(), run_id=manager.parent_run_id)
        except Exception:  # a callback handler must not break the call
            log.debug("dispatching the resilience event failed", exc_info=True)

    def adispatch(self, event: CallEvent) -> Awaitable[None] | None:
        """`dispatch` for async runs: the awaitable that sends `event` to the run's
        (async) callback handlers, or `None` when there is no handler to send it to
        (most calls: nothing to await)."""
        manager = _parent_manager(is_async=True)
        return None if manager is None else _asend(manager, event)


async def _asend(manager: Any, event: CallEvent) -> None:
    try:
        await manager.on_custom_event(EVENT_NAME, event.as_dict(), run_id=manager.parent_run_id)
    except Exception:  # a callback handler must not break the call
        log.debug("dispatching the resilience event failed", exc_info=True)


def _parent_manager(*, is_async: bool = False) -> Any:
    """The callback manager of the enclosing run, or `None` outside a run or without handlers."""
    try:
        # Callbacks can only come from the current run's config: look before paying
        # for `ensure_config` (a copy of the whole config) and a new callback manager,
        # which inside a graph is there on every call, usually with no handler at all.
        callbacks = (var_child_runnable_config.get() or {}).get("callbacks")
        if not callbacks or not getattr(callbacks, "handlers", True):
            return None
        config = ensure_config()
        if not config.get("callbacks"):
            return None
        get = get_async_callback_manager_for_config if is_async else get_callback_manager_for_config
        manager = get(config)
    except Exception:
        return None
    if manager.parent_run_id is None or not manager.handlers:
        return None
    return manager
