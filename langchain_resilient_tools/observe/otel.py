"""OpenTelemetry metrics and spans for finished calls, through the OpenTelemetry API.

Optional: install the ``otel`` extra (``opentelemetry-api``). Without it this module
does nothing. With it, instruments come from the global meter and tracer providers,
which the application configures (with the SDK and an exporter); until it does, the
API's no-op providers make every call here nearly free.

Metrics (attributes in braces):

- ``tool_call_total{tool,status}``: calls; `status` is ``success`` or the error type.
- ``tool_call_duration{tool,status}``: histogram of call durations, in seconds.
- ``tool_call_retries_total{tool}``: attempts after the first (hedges not included).
- ``tool_call_hedges_total{tool,won}``: hedged reads, the extra attempts sent beside
  slow ones; `won` is ``true`` when a hedge gave the answer.
- ``tool_breaker_opens_total{tool}``: times the tool's breaker was seen opening.
- ``tool_breaker_state{tool}``: gauge, 0 closed, 1 half open, 2 open.

Spans: one ``tool_call <tool>`` span per call, timed from the call's start to its end,
with the call record as attributes (``resilience.hedges`` and ``resilience.hedge_won``
on a hedged call; a child of the span current when the call ended).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from .stats import CallEvent

try:
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the optional extra is not installed
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

SCOPE = "langchain_resilient_tools"
BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}

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


def _span_attributes(event: CallEvent) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "tool": event.tool,
        "status": event.status,
        "gen_ai.tool.name": event.tool,
        "gen_ai.tool.call.id": event.call_id,
        "resilience.attempts": event.attempts,
        "resilience.served_by": event.served_by,
        "resilience.repairs": list(event.repairs),
    }
    if event.error:
        attrs["error.type"] = event.error
    if event.breaker:
        attrs["resilience.breaker"] = event.breaker
    if event.hedges:
        attrs["resilience.hedges"] = event.hedges
        attrs["resilience.hedge_won"] = event.hedge_won
    return attrs


_UNSET_PROVIDERS = frozenset(
    {"_ProxyMeterProvider", "NoOpMeterProvider", "ProxyTracerProvider", "NoOpTracerProvider"}
)


_known_configured = False
"""Set once a real provider is seen: the API lets each provider be set once per process."""
_ENV_NAMES_PROVIDER = any(
    name in os.environ for name in ("OTEL_PYTHON_METER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
)
"""The environment names a provider (read once: the API reads it when first asked)."""
_MISSING = object()


def _maybe_set() -> bool:
    """Cheap: whether a provider may have been set (the API's globals, or the environment
    that names one). Asked on every call, so it does not call the API's getters."""
    internal = getattr(_metrics, "_internal", None)
    meter = getattr(internal, "_METER_PROVIDER", _MISSING)
    tracer = getattr(_trace, "_TRACER_PROVIDER", _MISSING)
    if meter is _MISSING or tracer is _MISSING:
        return True  # another API layout: ask the getters
    return meter is not None or tracer is not None or _ENV_NAMES_PROVIDER


def configured() -> bool:
    """Whether the application has set a real meter or tracer provider (an SDK)."""
    global _known_configured
    if _known_configured:
        return True
    if _metrics is None or _trace is None or not _maybe_set():
        return False
    meter = type(_metrics.get_meter_provider()).__name__
    tracer = type(_trace.get_tracer_provider()).__name__
    _known_configured = meter not in _UNSET_PROVIDERS or tracer not in _UNSET_PROVIDERS
    return _known_configured


def emit(event: CallEvent, *, breaker_opened: bool = False) -> None:
    """Record `event` as metrics and a span. Never raises.

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
        inst.duration.record(event.duration_ms / 1000, labels)
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
        start_ns = int(event.at * 1e9)
        span = inst.tracer.start_span(
            f"tool_call {event.tool}", start_time=start_ns, attributes=_span_attributes(event)
        )
        if event.error:
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.error))
        span.end(end_time=start_ns + int(event.duration_ms * 1e6))
    except Exception:  # telemetry must never break a call
        log.debug("OpenTelemetry export failed", exc_info=True)
