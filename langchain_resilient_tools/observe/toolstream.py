"""A call on LangGraph's ``tools`` stream: one start and one end per tool call id.

LangGraph streams tool calls (``stream_mode="tools"``, and the `ToolCallStream`s of
``stream_events(version="v3")``) from the callbacks of each run of a tool: every run
reports ``tool-started``, then ``tool-finished`` or ``tool-error`` with the exception's
text. Through the layer one call may run its tool several times (retries, hedges), or
never (a cached or reused result, a refusal), so the stream showed one handle per
attempt, the raw text of each failed attempt (secrets included), a late end from an
attempt cut at its timeout, and nothing for a call answered without running.

While a call runs, `open_stream` puts a stand-in for LangGraph's stream handler
(`CallStream`) in the call's own config (the one dict ToolNode built for it; the
original comes back at the end). The call is reported once: started when it starts,
with the arguments the model sent; ended when it is answered, ``tool-finished`` with the
answer the model reads, or ``tool-error`` whose message is the envelope's summary
(``"timeout: get_weather did not answer within 5.0 s."``) while the model reads the
envelope. The runs of its attempts are kept off the stream; other tool runs (the tools a
tool runs itself) pass through. Output deltas (`ToolRuntime.emit_output_delta`) reach
the call's handle from every attempt. Every other callback handler (tracers included)
still sees each attempt as a tool run of its own. A call made with plain arguments (no
tool call id, `ResilientTool.invoke({...})`) is not grouped. A run that streams no tool
events pays one look at its handlers.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.tools import ToolException

from ..core.call import DIRECT_CALL_PREFIX, Call
from ..text.classify import Failure
from ..text.envelope import success_message

_HANDLER_MODULE = "langgraph.pregel._tools"
"""Where LangGraph's stream handler (``StreamToolCallHandler``) lives: read from
`sys.modules`, never imported here (a run that streams has imported it; the wrapper
alone does not pay for LangGraph's Pregel)."""

log = logging.getLogger(__name__)


class CallStream(BaseCallbackHandler):
    """LangGraph's stream handler as one call's runs reach it (see the module)."""

    run_inline = True  # as the handler it stands in for: events stay in order

    def __init__(self, inner: Any, call_id: str) -> None:
        self.inner = inner
        self.call_id = call_id
        self.run_id = uuid.uuid4()
        """The id under which the call itself is reported."""
        self._attempts: set[UUID] = set()
        self._config: dict[str, Any] | None = None
        self._original: Any = None
        self._replaced: Any = None

    # -- the runs of the call's tool: attempts are kept off the stream ----------------

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, **kwargs: Any) -> Any:
        if kwargs.get("tool_call_id") == self.call_id:
            self._attempts.add(run_id)  # an attempt of the call: its start was reported
            return None
        return self.inner.on_tool_start(serialized, input_str, run_id=run_id, **kwargs)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> Any:
        if run_id in self._attempts:
            self._attempts.discard(run_id)
            return None
        return self.inner.on_tool_end(output, run_id=run_id, **kwargs)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> Any:
        if run_id in self._attempts:
            self._attempts.discard(run_id)
            return None
        return self.inner.on_tool_error(error, run_id=run_id, **kwargs)

    # -- the call itself ------------------------------------------------------------

    def _start(self, call: Call, manager: Any) -> None:
        config = self._config or {}
        tool = call.tool
        owner = manager if isinstance(manager, BaseCallbackManager) else None
        tags = [*(owner.tags if owner else ()), *(config.get("tags") or ())]
        tags += getattr(tool, "tags", None) or ()
        metadata = {**(owner.metadata if owner else {}), **(config.get("metadata") or {})}
        metadata.update(getattr(tool, "metadata", None) or {})
        args = dict(call.args)
        self.inner.on_tool_start(
            {"name": call.name, "description": getattr(tool, "description", "")},
            str(args),
            run_id=self.run_id,
            parent_run_id=owner.parent_run_id if owner else None,
            tags=tags,
            metadata=metadata,
            inputs=args,
            tool_call_id=call.id,
        )

    def answered(self, call: Call, value: Any, failure: Failure | None) -> None:
        """Report the call's end: its answer, or its envelope's summary as the error."""
        try:
            if failure is None:
                self.inner.on_tool_end(success_message(value, call), run_id=self.run_id)
            else:
                summary = f"{failure.error.value}: {failure.message}"
                self.inner.on_tool_error(ToolException(summary), run_id=self.run_id)
        except Exception:  # the stream must never make a call fail
            log.debug("reporting the call's end on the tools stream failed", exc_info=True)
        finally:
            self._restore()

    def stopped(self, exc: BaseException) -> None:
        """The call did not finish: an interrupt (paused: LangGraph reports it again on
        resume), a cancellation, or an error for the graph's author, as ToolNode's."""
        try:
            self.inner.on_tool_error(exc, run_id=self.run_id)
        except Exception:
            log.debug("reporting the call's stop on the tools stream failed", exc_info=True)
        finally:
            self._restore()

    def _restore(self) -> None:
        config, self._config = self._config, None
        if config is not None and config.get("callbacks") is self._replaced:
            config["callbacks"] = self._original


def _stream_handler(callbacks: Any) -> Any:
    """LangGraph's stream handler among `callbacks` (a manager or a list), if any."""
    handlers = getattr(callbacks, "handlers", callbacks)  # a manager's, or a list
    if not handlers or type(handlers) is not list:
        return None  # the common case: a run with no handler at all
    cls = _handler_class or _find_handler_class()
    for handler in handlers:
        # The class itself (LangGraph makes no subclass): `isinstance` on a class that
        # derives from a Protocol (LangChain's streaming handler) costs microseconds.
        if type(handler) is cls:
            return handler
    return None


_handler_class: type | None = None
"""LangGraph's stream handler class, once a run has imported it."""


def _find_handler_class() -> type | None:
    global _handler_class
    _handler_class = getattr(sys.modules.get(_HANDLER_MODULE), "StreamToolCallHandler", None)
    return _handler_class


def _swapped(handlers: list[Any], inner: Any, stream: CallStream) -> list[Any]:
    return [stream if h is inner else h for h in handlers]


def open_stream(call: Call) -> CallStream | None:
    """Report `call` started on its run's ``tools`` stream and keep its attempts off it;
    `None` (nothing done) when the run streams no tool events or the call has no id."""
    config = call.config
    if not isinstance(config, dict):
        return None
    callbacks = config.get("callbacks")
    if not callbacks:
        return None
    inner = _stream_handler(callbacks)
    if inner is None or not call.id or call.id.startswith(DIRECT_CALL_PREFIX):
        return None
    stream = CallStream(inner, call.id)
    if isinstance(callbacks, BaseCallbackManager):
        replaced: Any = callbacks.copy()
        replaced.handlers = _swapped(replaced.handlers, inner, stream)
        replaced.inheritable_handlers = _swapped(replaced.inheritable_handlers, inner, stream)
    else:
        replaced = _swapped(list(callbacks), inner, stream)
    stream._config, stream._original, stream._replaced = config, callbacks, replaced
    try:
        stream._start(call, callbacks)
    except Exception:
        log.debug("reporting the call's start on the tools stream failed", exc_info=True)
        return None
    config["callbacks"] = replaced
    return stream
