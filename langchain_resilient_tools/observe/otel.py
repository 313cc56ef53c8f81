"""OpenTelemetry spans and metrics of tool calls, through the OpenTelemetry API.

Optional: install the ``otel`` extra (``opentelemetry-api``). Without it this module
does nothing. With it, instruments come from the global meter and tracer providers,
which the application configures (with the SDK and an exporter); until it does, nothing
is built at all and a call pays one cheap check.

**Spans** follow OpenTelemetry's GenAI semantic conventions for tool execution (still
"development" upstream). Each call is one span, ``execute_tool {gen_ai.tool.name}``
(kind ``INTERNAL``), current while the call runs, so the spans the tool makes (HTTP, an
MCP client, a database) are its descendants:

- ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` = ``function`` (the application runs
  the tool: a LangChain tool, an MCP server's tool called by its client),
  ``gen_ai.tool.description``; set when the span starts;
- on failure ``error.type``: the error envelope's type (`ToolErrorType`: ``timeout``,
  ``transient_failure``, ``tool_error``, ...), and the span status ``ERROR``;
- what only this layer knows, under ``lrt.``: ``lrt.outcome``, ``lrt.attempts``,
  ``lrt.retries``, ``lrt.hedges.sent`` and ``lrt.hedges.winner`` (0: the first attempt
  answered; n: the n-th hedge), ``lrt.served_by`` (``tool``, ``cache``,
  ``stale_cache``, ``dedup``, ``journal``, ``fallback``, or what refused the call),
  ``lrt.breaker.state``, ``lrt.repairs``, ``lrt.classified_as`` / ``lrt.classified_by``
  (read or write, and what decided it).

Each attempt that runs the tool is a child span ``attempt {tool}`` (``lrt.attempt.number``,
``lrt.attempt.hedge`` for a hedge, ``lrt.attempt.outcome``, ``error.type`` when it
failed): as OpenTelemetry's HTTP conventions give each resend its own span, a retried
call shows each try, the backoff between them, and which try made which of the tool's
own spans; a hedged call shows its attempts overlapping. Exception messages are never
recorded (they may carry secrets); ``lrt.attempt.exception`` names the exception type.

**Metrics** (attributes in braces):

- ``tool_call_total{tool,status}``: calls; `status` is ``success`` or the error type.
- ``tool_call_duration{tool,status}``: histogram of call durations, in seconds.
- ``gen_ai.execute_tool.duration{gen_ai.operation.name,gen_ai.tool.name,gen_ai.tool.type,
  error.type}``: the same durations, as the GenAI conventions name them.
- ``tool_call_retries_total{tool}``: attempts after the first (hedges not included).
- ``tool_call_hedges_total{tool,won}``: hedged reads, the extra attempts sent beside
  slow ones; `won` is ``true`` when a hedge gave the answer.
- ``tool_breaker_opens_total{tool}``: times the tool's breaker was seen opening.
- ``tool_breaker_state{tool}``: gauge, 0 closed, 1 half open, 2 open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langgraph.errors import GraphBubbleUp

from ..core.call import Call
from ..core.errors import is_for_author
from ..text.classify import error_type
from .stats import UNKNOWN_TOOL_LABEL, CallEvent

try:
    from opentelemetry import context as _context
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the optional extra is not installed
    _context = None  # type: ignore[assignment]
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

SCOPE = "langchain_resilient_tools"
BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}
OPERATION = "execute_tool"
"""``gen_ai.operation.name`` of a tool call."""
TOOL_TYPE = "function"
"""``gen_ai.tool.type``: the application executes the tool (the conventions' "function";
"extension" and "datastore" are tools the agent's service runs itself)."""

T = TypeVar("T")
log = logging.getLogger(__name__)


class _Instruments:
    def __init__(self) -> None:
        assert _metrics is not None and _trace is not None
        meter = _metrics.get_meter(SCOPE)
        self.calls = meter.create_counter(
            "tool_call_total", unit="{call}", description="Tool calls by tool and status."
        )
        self.duration = meter.create_histogram(
            "tool_call_duration", unit="s", description="Duration of tool calls."
        )
        self.genai_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration", unit="s", description="The duration of a tool call."
        )
        self.retries = meter.create_counter(
            "tool_call_retries_total", unit="{attempt}", description="Attempts after the first."
        )
        self.hedges = meter.create_counter(
            "tool_call_hedges_total",
            unit="{attempt}",
            description="Hedged reads: extra attempts sent beside slow ones, by whether one won.",
        )
        self.opens = meter.create_counter(
            "tool_breaker_opens_total", unit="{open}", description="Circuit breaker openings."
        )
        self.breaker = meter.create_gauge(
            "tool_breaker_state", description="Breaker state: 0 closed, 1 half open, 2 open."
        )
        self.tracer = _trace.get_tracer(SCOPE)


_instruments: _Instruments | None = None
_lock = threading.Lock()


def available() -> bool:
    """Whether the OpenTelemetry API is installed."""
    return _metrics is not None


def _get() -> _Instruments | None:
    global _instruments
    if _metrics is None:
        return None
    if _instruments is None:
        with _lock:
            if _instruments is None:
                _instruments = _Instruments()
    return _instruments


_UNSET_PROVIDERS = frozenset(
    {"_ProxyMeterProvider", "NoOpMeterProvider", "ProxyTracerProvider", "NoOpTracerProvider"}
)


_known_configured = False
"""Set once a real provider is seen: the API lets each provider be set once per process."""
_ENV_NAMES_PROVIDER = any(
    name in os.environ for name in ("OTEL_PYTHON_METER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
)
"""The environment names a provider (read once: the API reads it when first asked)."""


_API_INTERNAL: Any = getattr(_metrics, "_internal", None)
"""The metrics API's module that holds its global provider (`None`: another layout)."""
_FAST_CHECK = (
    _API_INTERNAL is not None
    and hasattr(_API_INTERNAL, "_METER_PROVIDER")
    and hasattr(_trace, "_TRACER_PROVIDER")
    and not _ENV_NAMES_PROVIDER
)
"""Whether `configured` can answer "no" from the API's two globals alone."""


def configured() -> bool:
    """Whether the application has set a real meter or tracer provider (an SDK).

    Asked on every call: until a provider is set, it reads the API's two globals and
    calls nothing."""
    global _known_configured
    if _known_configured:
        return True
    if _FAST_CHECK and _API_INTERNAL._METER_PROVIDER is None and _trace._TRACER_PROVIDER is None:
        return False
    if _metrics is None or _trace is None:
        return False
    meter = type(_metrics.get_meter_provider()).__name__
    tracer = type(_trace.get_tracer_provider()).__name__
    _known_configured = meter not in _UNSET_PROVIDERS or tracer not in _UNSET_PROVIDERS
    return _known_configured


# -- the call's span -------------------------------------------------------------------


def _tool_label(call: Call) -> str:
    return call.name if call.tool is not None else UNKNOWN_TOOL_LABEL


def enter(call: Call) -> object | None:
    """Start `call`'s span and make it current; returns the token for `leave`, or `None`
    (and does nothing) unless a provider is set. The span ends in `emit` (or
    `interrupted`)."""
    if not configured():
        return None
    inst = _get()
    if inst is None or _context is None:
        return None
    try:
        label = _tool_label(call)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.tool.name": label,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": TOOL_TYPE,
        }
        description = getattr(call.tool, "description", None)
        if isinstance(description, str) and description:
            attrs["gen_ai.tool.description"] = description
        span = inst.tracer.start_span(f"{OPERATION} {label}", attributes=attrs)
        call.span = span
        return _context.attach(_trace.set_span_in_context(span))
    except Exception:  # telemetry must never break a call
        log.debug("starting the OpenTelemetry span failed", exc_info=True)
        return None


def leave(token: object) -> None:
    """Make the span that was current before `enter` current again."""
    try:
        _context.detach(token)  # type: ignore[arg-type]
    except Exception:
        log.debug("detaching the OpenTelemetry context failed", exc_info=True)


def _how_it_stopped(exc: BaseException) -> str:
    if isinstance(exc, GraphBubbleUp):
        return "interrupted"  # LangGraph control flow: an interrupt, a parent command
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"


def interrupted(call: Call, exc: BaseException) -> None:
    """End `call`'s span when the call did not finish: LangGraph control flow passed
    through it, it was cancelled, or it raised for the graph's author."""
    span, call.span = call.span, None
    if span is None:
        return
    try:
        how = _how_it_stopped(exc)
        span.set_attribute("lrt.outcome", how)
        if how == "error":
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, type(exc).__qualname__))
        span.end()
    except Exception:
        log.debug("ending the OpenTelemetry span failed", exc_info=True)


def _end_attributes(event: CallEvent) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "lrt.outcome": event.outcome,
        "lrt.attempts": event.attempts,
        "lrt.retries": max(0, event.attempts - 1 - event.hedges),
        "lrt.served_by": event.served_by,
    }
    if event.error:
        attrs["error.type"] = event.error
    if event.repairs:
        attrs["lrt.repairs"] = list(event.repairs)
    if event.breaker:
        attrs["lrt.breaker.state"] = event.breaker
    if event.hedges:
        attrs["lrt.hedges.sent"] = event.hedges
        attrs["lrt.hedges.winner"] = event.hedge_winner
    if event.classified_by:
        attrs["lrt.classified_as"] = event.classified_as
        attrs["lrt.classified_by"] = event.classified_by
    return attrs


def _finish_span(inst: _Instruments, event: CallEvent, span: Any) -> None:
    name = f"{OPERATION} {event.tool}"
    attrs = _end_attributes(event)
    if span is None:  # no live span (tracing began mid-call): one made from the record
        start_ns = int(event.at * 1e9)
        attrs.update(
            {
                "gen_ai.operation.name": OPERATION,
                "gen_ai.tool.name": event.tool,
                "gen_ai.tool.call.id": event.call_id,
                "gen_ai.tool.type": TOOL_TYPE,
            }
        )
        span = inst.tracer.start_span(name, start_time=start_ns, attributes=attrs)
        end_ns: int | None = start_ns + int(event.duration_ms * 1e6)
    else:
        if span.name != name:  # a call to an unknown tool that a user's wrapper answered
            span.update_name(name)
            attrs["gen_ai.tool.name"] = event.tool
        span.set_attributes(attrs)
        end_ns = None
    if event.error:
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.error))
    span.end(end_time=end_ns)


def emit(event: CallEvent, *, breaker_opened: bool = False, span: Any = None) -> None:
    """Record `event` as metrics and end its span (`span`: the call's live span from
    `enter`; without one, a span is made from the event). Never raises.

    Until the application sets a provider the API would only forward to no-ops, so
    nothing is built at all (the hot path of every call).
    """
    if not configured():
        return
    inst = _get()
    if inst is None:
        return
    try:
        labels = {"tool": event.tool, "status": event.status}
        inst.calls.add(1, labels)
        seconds = event.duration_ms / 1000
        inst.duration.record(seconds, labels)
        genai = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.tool.name": event.tool,
            "gen_ai.tool.type": TOOL_TYPE,
        }
        if event.error:
            genai["error.type"] = event.error
        inst.genai_duration.record(seconds, genai)
        retries = event.attempts - 1 - event.hedges
        if retries > 0:
            inst.retries.add(retries, {"tool": event.tool})
        if event.hedges:
            won = "true" if event.hedge_won else "false"
            inst.hedges.add(event.hedges, {"tool": event.tool, "won": won})
        if breaker_opened:
            inst.opens.add(1, {"tool": event.tool})
        if event.breaker in BREAKER_CODES:
            inst.breaker.set(BREAKER_CODES[event.breaker], {"tool": event.tool})
        _finish_span(inst, event, span)
    except Exception:  # telemetry must never break a call
        log.debug("OpenTelemetry export failed", exc_info=True)


# -- attempts ----------------------------------------------------------------------------


def _start_attempt(call: Call) -> tuple[Any, object]:
    inst = _get()
    assert inst is not None and _context is not None
    attrs: dict[str, Any] = {"lrt.attempt.number": call.record.attempts + 1}
    if call.hedge:
        attrs["lrt.attempt.hedge"] = call.hedge
    span = inst.tracer.start_span(f"attempt {_tool_label(call)}", attributes=attrs)
    return span, _context.attach(_trace.set_span_in_context(span))


def _end_attempt(span: Any, token: object, call: Call, exc: BaseException | None) -> None:
    leave(token)
    try:
        if exc is None:
            span.set_attribute("lrt.attempt.outcome", "success")
        else:
            how = _how_it_stopped(exc)
            span.set_attribute("lrt.attempt.outcome", how)
            if how == "error":
                original = getattr(exc, "original", exc)
                span.set_attribute("lrt.attempt.exception", type(original).__qualname__)
                error = (
                    type(exc).__qualname__ if is_for_author(exc) else error_type(exc, call).value
                )
                span.set_attribute("error.type", error)
                span.set_status(_trace.Status(_trace.StatusCode.ERROR, error))
        span.end()
    except Exception:
        log.debug("ending the OpenTelemetry attempt span failed", exc_info=True)


def attempt(call: Call, run: Callable[[], T]) -> T:
    """Run one attempt of `call` (sync) in a span of its own, a child of the call's."""
    try:
        span, token = _start_attempt(call)
    except Exception:
        log.debug("starting the OpenTelemetry attempt span failed", exc_info=True)
        return run()
    try:
        value = run()
    except BaseException as exc:
        _end_attempt(span, token, call, exc)
        raise
    _end_attempt(span, token, call, None)
    return value


async def aattempt(call: Call, run: Callable[[], Awaitable[T]]) -> T:
    """`attempt` for the async path: `run` starts the attempt inside the attempt's span."""
    try:
        span, token = _start_attempt(call)
    except Exception:
        log.debug("starting the OpenTelemetry attempt span failed", exc_info=True)
        return await run()
    try:
        value = await run()
    except BaseException as exc:
        _end_attempt(span, token, call, exc)
        raise
    _end_attempt(span, token, call, None)
    return value
