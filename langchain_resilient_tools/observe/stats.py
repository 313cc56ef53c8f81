"""Per-tool call statistics: bounded, thread-safe, and free of I/O.

Every finished call becomes a `CallEvent`. `Stats` keeps, per tool, counters (calls by
outcome and error type, attempts, retries, repairs, who served the answer) and a
bounded reservoir of recent latencies for percentiles, plus the last `max_events`
events for plots over time. Memory stays bounded however long a process runs.

`Stats.snapshot()` returns a `StatsSnapshot`: `rows()` for code, a plain-text table as
``str(...)``, an HTML table in Jupyter, and `plot()` (needs matplotlib).
"""

from __future__ import annotations

import html
import math
import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

UNKNOWN_TOOL_LABEL = "<unknown>"
"""The one `tool` label (stats row, metric attribute, span name) of every call to a tool
that does not exist."""
DEFAULT_MAX_EVENTS = 1000
"""How many recent call events a `Stats` keeps (for plots over time)."""
DEFAULT_LATENCY_WINDOW = 1000
"""How many recent latencies per tool the percentiles are computed from."""


class CallEvent(NamedTuple):
    """What one finished call left behind (handed to observers; immutable: a named
    tuple, built in one step on every call's hot path)."""

    tool: str
    call_id: str
    outcome: str
    """``success`` or ``error``."""
    error: str | None
    """The `ToolErrorType` value of a failed call."""
    attempts: int
    duration_ms: float
    repairs: tuple[str, ...]
    served_by: str
    """``tool``, or what answered instead (``dedup``, ``cache``, ``fallback``, ...)."""
    breaker: str | None
    """The tool's breaker state after the call, when it has a breaker."""
    at: float
    """Wall-clock time (``time.time()``) at which the call started."""
    hedges: int = 0
    """Extra attempts sent beside slow ones (hedged reads), counted in `attempts` too."""
    hedge_won: bool = False
    """Whether a hedge gave the answer."""
    hedge_winner: int = 0
    """Which attempt of a hedge race gave the answer (0: the first; n: the n-th hedge)."""
    classified_as: str | None = None
    """``read``, ``idempotent_write`` or ``write`` (`None` for a tool that does not exist)."""
    classified_by: str | None = None
    """What decided `classified_as`: ``explicit``, ``annotations`` or ``name``."""

    @property
    def status(self) -> str:
        """``success`` or the error type: the ``status`` label of metrics."""
        return self.error or self.outcome

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "call_id": self.call_id,
            "outcome": self.outcome,
            "error": self.error,
            "attempts": self.attempts,
            "duration_ms": round(self.duration_ms, 3),
            "repairs": list(self.repairs),
            "served_by": self.served_by,
            "breaker": self.breaker,
            "at": self.at,
            "classified_as": self.classified_as,
            "classified_by": self.classified_by,
            **({"hedges": self.hedges, "hedge_won": self.hedge_won} if self.hedges else {}),
        }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The `q`-th percentile (0-100) of `values` by nearest rank; `None` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(slots=True)
class _ToolCounters:
    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    served_by: Counter[str] = field(default_factory=Counter)
    attempts: int = 0
    retries: int = 0
    hedges: int = 0
    hedge_wins: int = 0
    repairs: int = 0
    breaker: str | None = None
    breaker_opens: int = 0
    classified_as: str | None = None
    classified_by: str | None = None
    latencies: deque[float] = field(default_factory=deque)


_FOLD_EVERY = 256
"""Events of tools without a breaker are counted in batches of at most this many."""
_TOOL = itemgetter(0)


def _add(counter: Counter[str], values: tuple[str, ...]) -> None:
    """Count each of `values` in `counter` (usually all the same: counted at once)."""
    first = values[0]
    if values.count(first) == len(values):
        counter[first] += len(values)
    else:
        counter.update(values)


def _by_tool(events: list[CallEvent]) -> dict[str, list[CallEvent]]:
    groups: dict[str, list[CallEvent]] = {}
    for event in events:
        groups.setdefault(event.tool, []).append(event)
    return groups


class Stats:
    """Statistics of one pipeline (one adapter instance), fed one `CallEvent` per call.

    An event that cannot open a breaker (the hot path: most tools have none) is only
    queued; queued events are counted in batches, and before anything is read, so what
    a snapshot shows is the same as if each had been counted at once."""

    def __init__(
        self,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        latency_window: int = DEFAULT_LATENCY_WINDOW,
    ) -> None:
        self._lock = threading.Lock()
        self._latency_window = latency_window
        self._tools: dict[str, _ToolCounters] = {}
        self._events: deque[CallEvent] = deque(maxlen=max_events)
        self._queued: deque[CallEvent] = deque()  # appended without the lock (atomic)

    def add(self, event: CallEvent) -> bool:
        """Count `event`; returns whether the tool's breaker was seen opening with it."""
        if event.breaker is None:  # cannot open a breaker: counted with the next batch
            queued = self._queued
            queued.append(event)
            if len(queued) >= _FOLD_EVERY:
                with self._lock:
                    self._fold()
            return False
        with self._lock:
            self._fold()
            return self._count(event)

    def _fold(self) -> None:
        """Count the queued events, in their order (call with the lock held): in bulk,
        per tool; one by one only in a batch where some call was more than answered at
        its first attempt, as it was sent (an error, a retry, a hedge, a repair)."""
        queued = self._queued
        n = len(queued)
        if not n:
            return
        batch = [queued.popleft() for _ in range(n)]  # appended meanwhile: the next fold
        self._events.extend(batch)
        tools = set(map(_TOOL, batch))
        groups = [(tools.pop(), batch)] if len(tools) == 1 else _by_tool(batch).items()
        for tool, events in groups:
            counters = self._counters(tool)
            fields = list(zip(*events, strict=True))  # each field of the events, as one tuple
            (_, _, outcomes, errors, attempts, durations, repairs, served_by, _, _, hedges,
             _, _, _, classified_by) = fields  # fmt: skip
            counters.calls += len(events)
            _add(counters.outcomes, outcomes)
            _add(counters.served_by, served_by)
            counters.attempts += sum(attempts)
            counters.latencies.extend(durations)
            for i in range(len(events) - 1, -1, -1):  # the last classification stands
                if classified_by[i] is not None:
                    counters.classified_as = events[i].classified_as
                    counters.classified_by = classified_by[i]
                    break
            if any(errors) or any(repairs) or any(hedges) or set(attempts) != {1}:
                for event in events:  # some call was more than answered at once, as sent
                    self._count_more(counters, event)

    def _counters(self, tool: str) -> _ToolCounters:
        counters = self._tools.get(tool)
        if counters is None:
            counters = self._tools[tool] = _ToolCounters(
                latencies=deque(maxlen=self._latency_window)
            )
        return counters

    def _count(self, event: CallEvent) -> bool:
        """Count one `event` (call with the lock held); whether it opened the breaker."""
        counters = self._counters(event.tool)
        counters.calls += 1
        counters.outcomes[event.outcome] += 1
        counters.served_by[event.served_by] += 1
        counters.attempts += event.attempts
        counters.latencies.append(event.duration_ms)
        self._events.append(event)
        if event.classified_by is not None:
            counters.classified_as = event.classified_as
            counters.classified_by = event.classified_by
        return self._count_more(counters, event)

    @staticmethod
    def _count_more(counters: _ToolCounters, event: CallEvent) -> bool:
        """What `event` adds beyond a call answered at once, as it was sent (errors,
        retries, hedges, repairs, the breaker); whether it opened the breaker."""
        (_, _, _, error, attempts, _, repairs, _, breaker, _, hedges, hedge_won, *_) = event
        if error:
            counters.errors[error] += 1
        if attempts - hedges > 1:
            counters.retries += attempts - 1 - hedges
        if hedges:
            counters.hedges += hedges
            counters.hedge_wins += hedge_won
        if repairs:
            counters.repairs += len(repairs)
        opened = False
        if breaker is not None:
            opened = breaker == "open" and counters.breaker != "open"
            counters.breaker_opens += opened
            counters.breaker = breaker
        return opened

    def reset(self) -> None:
        """Forget everything counted so far."""
        with self._lock:
            self._queued.clear()
            self._tools.clear()
            self._events.clear()

    def snapshot(self) -> StatsSnapshot:
        """A consistent, immutable copy of the statistics at this moment."""
        with self._lock:
            self._fold()
            rows = [_row(name, c) for name, c in sorted(self._tools.items())]
            events = tuple(self._events)
        return StatsSnapshot(rows, events)


def _row(tool: str, c: _ToolCounters) -> dict[str, Any]:
    latencies = list(c.latencies)
    errors = c.outcomes.get("error", 0)

    def p(q: float) -> float | None:
        value = percentile(latencies, q)
        return None if value is None else round(value, 3)

    return {
        "tool": tool,
        "calls": c.calls,
        "success": c.outcomes.get("success", 0),
        "errors": errors,
        "error_rate": round(errors / c.calls, 4) if c.calls else 0.0,
        "errors_by_type": dict(sorted(c.errors.items())),
        "attempts": c.attempts,
        "retries": c.retries,
        "hedges": c.hedges,
        "hedge_wins": c.hedge_wins,
        "repairs": c.repairs,
        "served_by": dict(sorted(c.served_by.items())),
        "p50_ms": p(50),
        "p95_ms": p(95),
        "p99_ms": p(99),
        "max_ms": round(max(latencies), 3) if latencies else None,
        "breaker": c.breaker,
        "breaker_opens": c.breaker_opens,
        "classified_as": c.classified_as,
        "classified_by": c.classified_by,
    }


_TABLE_COLUMNS = (
    "tool", "calls", "success", "errors", "error_rate", "retries", "hedges", "p50_ms", "p95_ms",
    "p99_ms", "breaker", "errors_by_type", "served_by",
)  # fmt: skip


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:.3g}" if value < 1000 else f"{value:.0f}"
    return str(value)


class StatsSnapshot:
    """Per-tool statistics at one moment, plus the recent call events."""

    __slots__ = ("_rows", "events")

    def __init__(self, rows: list[dict[str, Any]], events: tuple[CallEvent, ...]) -> None:
        self._rows = rows
        self.events = events
        """The most recent call events, oldest first."""

    def rows(self) -> list[dict[str, Any]]:
        """One dict per tool (a copy: safe to change)."""
        return [dict(r) for r in self._rows]

    def __getitem__(self, tool: str) -> dict[str, Any]:
        for row in self._rows:
            if row["tool"] == tool:
                return dict(row)
        raise KeyError(tool)

    def __len__(self) -> int:
        return len(self._rows)

    def _cells(self) -> list[list[str]]:
        return [[_cell(row[c]) for c in _TABLE_COLUMNS] for row in self._rows]

    def __str__(self) -> str:
        table = [list(_TABLE_COLUMNS), *self._cells()]
        widths = [max(len(r[i]) for r in table) for i in range(len(_TABLE_COLUMNS))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in table]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)

    def __repr__(self) -> str:
        return f"<StatsSnapshot tools={len(self._rows)} events={len(self.events)}>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in _TABLE_COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in cells) + "</tr>"
            for cells in self._cells()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def plot(self, *, ax: Sequence[Any] | None = None) -> Any:
        """Latency and outcomes over time, one series per tool (needs matplotlib).

        Returns the matplotlib `Figure` (or, with `ax` = two axes, draws on them).
        """
        from .plot import plot_events

        return plot_events(self.events, ax=ax)
